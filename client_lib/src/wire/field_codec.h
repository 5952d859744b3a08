// Per-field encode and decode steps of the IPC codec, one per field type the
// codec supports (ipc.proto lists them). The generated per-message code
// (ipc_schema_codec.cc, written from ipc.proto at build time) is a sequence
// of these calls; the proto3 rules live here once:
//   - encoding: a scalar or string equal to its default is not emitted,
//     repeated elements always are, fields go out in the order called
//     (ascending field numbers, as libprotobuf writes them);
//   - decoding: a field whose wire type does not match the schema is
//     skipped (protobuf keeps it as an unknown field); int32 and enum
//     values keep the low 32 bits of the varint, as protobuf reads them;
//     the only failure is a proto3 string that is not valid UTF-8, which
//     libprotobuf refuses to parse.
// Every Merge* returns false on that failure and true otherwise.
#ifndef GPUCTL_CLIENT_LIB_SRC_WIRE_FIELD_CODEC_H_
#define GPUCTL_CLIENT_LIB_SRC_WIRE_FIELD_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "client_lib/src/wire/wire_format.h"

namespace gpuctl::wire::codec {

// ---- Encoding. The overload is chosen by the struct member's C++ type;
// string and bytes encode alike.

template <typename Sink>
void PutField(Sink& sink, uint32_t number, uint32_t value) {
  PutVarintField(sink, number, value);
}
template <typename Sink>
void PutField(Sink& sink, uint32_t number, uint64_t value) {
  PutVarintField(sink, number, value);
}
template <typename Sink>
void PutField(Sink& sink, uint32_t number, int32_t value) {
  PutVarintField(sink, number, Int32ToVarint(value));
}
template <typename Sink>
void PutField(Sink& sink, uint32_t number, int64_t value) {
  PutVarintField(sink, number, static_cast<uint64_t>(value));
}
template <typename Sink>
void PutField(Sink& sink, uint32_t number, bool value) {
  PutVarintField(sink, number, value ? 1 : 0);
}
template <typename Sink>
void PutField(Sink& sink, uint32_t number, const std::string& value) {
  PutStringField(sink, number, value);
}
template <typename Sink>
void PutField(Sink& sink, uint32_t number, const std::vector<std::string>& values) {
  for (const std::string& value : values) {
    PutLengthDelimitedAlways(sink, number, value);
  }
}

// ---- Decoding. Scalars take the overload of the member's C++ type; enum
// fields are int32_t members and decode as int32.

inline bool MergeField(const WireField& f, uint32_t* value) {
  if (f.type == WireType::kVarint) *value = static_cast<uint32_t>(f.number_value);
  return true;
}
inline bool MergeField(const WireField& f, uint64_t* value) {
  if (f.type == WireType::kVarint) *value = f.number_value;
  return true;
}
inline bool MergeField(const WireField& f, int32_t* value) {
  if (f.type == WireType::kVarint) *value = static_cast<int32_t>(f.number_value);
  return true;
}
inline bool MergeField(const WireField& f, int64_t* value) {
  if (f.type == WireType::kVarint) *value = static_cast<int64_t>(f.number_value);
  return true;
}
inline bool MergeField(const WireField& f, bool* value) {
  if (f.type == WireType::kVarint) *value = f.number_value != 0;
  return true;
}

// proto3 `string`: checked UTF-8.
inline bool MergeString(const WireField& f, std::string* value) {
  if (f.type != WireType::kLengthDelimited) return true;
  if (!IsValidUtf8(f.bytes)) return false;
  value->assign(f.bytes);
  return true;
}
// proto3 `bytes`: taken as is.
inline bool MergeBytes(const WireField& f, std::string* value) {
  if (f.type == WireType::kLengthDelimited) value->assign(f.bytes);
  return true;
}
// `repeated string`: each element appends.
inline bool MergeString(const WireField& f, std::vector<std::string>* values) {
  if (f.type != WireType::kLengthDelimited) return true;
  if (!IsValidUtf8(f.bytes)) return false;
  values->emplace_back(f.bytes);
  return true;
}

}  // namespace gpuctl::wire::codec

#endif  // GPUCTL_CLIENT_LIB_SRC_WIRE_FIELD_CODEC_H_
