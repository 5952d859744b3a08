// Protobuf wire-format primitives for the client library's IPC codec.
//
// Encoding goes through a Sink (SizeSink counts, StringSink appends) so one
// field-writing routine per message yields both the exact size of a nested
// message (needed for its length prefix) and its bytes, with no temporary
// buffers. Decoding goes through WireReader, which never reads outside the
// view it was given and mirrors libprotobuf 3.21's acceptance rules:
//   - value varints: at most 10 bytes, bits past 64 dropped;
//   - tags: at most 5 bytes, bits past 32 dropped; field number 0 rejected;
//   - lengths: at most 5 bytes, below 2^31 - 16, and inside the input;
//   - wire types 0 (varint), 1 (fixed64), 2 (length-delimited), 5 (fixed32)
//     accepted; groups (3, 4) and 6, 7 rejected.
// Everything here is header-light and dependency-free: it is linked into a
// library that loads into foreign processes.
#ifndef GPUCTL_CLIENT_LIB_SRC_WIRE_WIRE_FORMAT_H_
#define GPUCTL_CLIENT_LIB_SRC_WIRE_WIRE_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpuctl::wire {

enum class WireType : uint8_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

inline constexpr uint32_t kMaxFieldNumber = (1u << 29) - 1;
inline constexpr size_t kMaxVarintBytes = 10;

// Bytes VarintSize(v) takes on the wire (1..10).
size_t VarintSize(uint64_t value);

// int32/enum values are sign-extended to 64 bits before encoding, so a
// negative value takes 10 bytes; this is what protobuf does.
constexpr uint64_t Int32ToVarint(int32_t value) {
  return static_cast<uint64_t>(static_cast<int64_t>(value));
}
constexpr uint32_t MakeTag(uint32_t field_number, WireType type) {
  return (field_number << 3) | static_cast<uint32_t>(type);
}

// Appends raw wire bytes to a std::string.
class StringSink {
 public:
  explicit StringSink(std::string* out) : out_(out) {}
  void PutVarint(uint64_t value);
  void PutBytes(std::string_view bytes) { out_->append(bytes); }

 private:
  std::string* out_;
};

// Counts the bytes the same calls on a StringSink would append.
class SizeSink {
 public:
  void PutVarint(uint64_t value) { size_ += VarintSize(value); }
  void PutBytes(std::string_view bytes) { size_ += bytes.size(); }
  size_t size() const { return size_; }

 private:
  size_t size_ = 0;
};

// Field writers. Proto3 scalars and strings equal to their default (0, "")
// are not emitted, matching protobuf's serializer. Fields are expected to be
// written in ascending field-number order so the output is byte-identical to
// libprotobuf's.
template <typename Sink>
void PutVarintField(Sink& sink, uint32_t field_number, uint64_t value) {
  if (value == 0) {
    return;
  }
  sink.PutVarint(MakeTag(field_number, WireType::kVarint));
  sink.PutVarint(value);
}

// Always emitted: used for repeated elements and oneof members, where an
// empty value is still present.
template <typename Sink>
void PutLengthDelimitedAlways(Sink& sink, uint32_t field_number, std::string_view bytes) {
  sink.PutVarint(MakeTag(field_number, WireType::kLengthDelimited));
  sink.PutVarint(bytes.size());
  sink.PutBytes(bytes);
}

template <typename Sink>
void PutStringField(Sink& sink, uint32_t field_number, std::string_view bytes) {
  if (bytes.empty()) {
    return;
  }
  PutLengthDelimitedAlways(sink, field_number, bytes);
}

// One decoded field. For kVarint, kFixed64 and kFixed32 the value is in
// `number_value` (fixed values little-endian decoded); for kLengthDelimited
// the payload is `bytes`, a view into the reader's input.
struct WireField {
  uint32_t field_number = 0;
  WireType type = WireType::kVarint;
  uint64_t number_value = 0;
  std::string_view bytes;
};

// Bounds-checked, forward-only reader over one message's bytes.
class WireReader {
 public:
  explicit WireReader(std::string_view input) : input_(input) {}
  // The reader keeps a view: it must not outlive the bytes it reads.
  explicit WireReader(std::string&&) = delete;

  bool AtEnd() const { return pos_ == input_.size(); }
  size_t position() const { return pos_; }

  // Reads a value varint (up to 10 bytes; bits past 64 are dropped).
  bool ReadVarint(uint64_t* value);
  // Reads a tag (up to 5 bytes; bits past 32 are dropped) and splits it.
  // Fails on field number 0 and on wire types other than 0, 1, 2, 5.
  bool ReadTag(uint32_t* field_number, WireType* type);
  // Reads a length prefix and the bytes it covers.
  bool ReadLengthDelimited(std::string_view* bytes);
  bool ReadFixed32(uint32_t* value);
  bool ReadFixed64(uint64_t* value);

  // Reads the next tag and its whole value, whatever the field: callers
  // match the fields they know and drop the rest, which is how unknown
  // fields are skipped. Returns false on any malformed or truncated input.
  bool ReadField(WireField* field);

 private:
  bool ReadLength(size_t* length);
  bool ReadLittleEndian(size_t bytes, uint64_t* value);

  std::string_view input_;
  size_t pos_ = 0;
};

// Whether `bytes` is well-formed UTF-8 by the rules protobuf enforces on
// proto3 `string` fields: no overlong forms, no surrogates (U+D800..DFFF),
// nothing above U+10FFFF. libprotobuf refuses to parse a message whose
// string field fails this, so producers must not send such strings.
bool IsValidUtf8(std::string_view bytes);

// `bytes` with every maximal invalid UTF-8 subsequence replaced by U+FFFD,
// for text taken from the environment (command lines, hostnames) before it
// is put in a string field.
std::string ToValidUtf8(std::string_view bytes);

}  // namespace gpuctl::wire

#endif  // GPUCTL_CLIENT_LIB_SRC_WIRE_WIRE_FORMAT_H_
