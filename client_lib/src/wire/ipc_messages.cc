// Encode/Decode of the datagram types on top of the generated per-message
// steps (ipc_schema_codec.h). Semantics follow libprotobuf for proto3:
// defaults are not emitted, fields may come in any order, unknown fields and
// known fields with an unexpected wire type are skipped, a repeated scalar
// keeps the last value, repeated strings append, an embedded message seen
// twice is merged, and a different oneof member replaces the current one.
#include "client_lib/src/wire/ipc_messages.h"

#include <type_traits>
#include <variant>

#include "client_lib/src/wire/ipc_schema_codec.h"
#include "client_lib/src/wire/wire_format.h"

namespace gpuctl::wire {
namespace {

// A datagram variant's alternative i (after std::monostate) is the oneof
// member with field number i: the generator refuses a schema where that
// does not hold.
template <typename Variant>
void EncodeOneof(const Variant& message, std::string* out) {
  const auto field_number = static_cast<uint32_t>(message.index());
  std::visit(
      [&](const auto& member) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(member)>, std::monostate>) {
          SizeSink size;
          codec::PutFields(size, member);
          out->reserve(out->size() + 2 * kMaxVarintBytes + size.size());
          StringSink sink(out);
          // A set oneof member is emitted even when all its fields are
          // default: presence is the information.
          sink.PutVarint(MakeTag(field_number, WireType::kLengthDelimited));
          sink.PutVarint(size.size());
          codec::PutFields(sink, member);
        }
      },
      message);
}

// Parses `bytes` into `message` without clearing it first: this is what
// gives protobuf's merge semantics when an embedded message appears twice.
template <typename Message>
bool MergeMessage(std::string_view bytes, Message* message) {
  WireReader reader(bytes);
  WireField field;
  while (!reader.AtEnd()) {
    if (!reader.ReadField(&field) || !codec::MergeField(field, message)) {
      return false;
    }
  }
  return true;
}

template <typename Variant, size_t kIndex = 1>
bool MergeOneofMember(uint32_t field_number, std::string_view bytes, Variant* out) {
  if constexpr (kIndex == std::variant_size_v<Variant>) {
    return true;  // an unknown oneof member from a newer peer: skipped
  } else {
    if (field_number != kIndex) {
      return MergeOneofMember<Variant, kIndex + 1>(field_number, bytes, out);
    }
    if (out->index() != kIndex) {
      out->template emplace<kIndex>();
    }
    return MergeMessage(bytes, std::get_if<kIndex>(out));
  }
}

template <typename Variant>
bool DecodeOneof(std::string_view bytes, Variant* out) {
  *out = std::monostate{};
  WireReader reader(bytes);
  WireField field;
  while (!reader.AtEnd()) {
    const bool ok =
        reader.ReadField(&field) && (field.type != WireType::kLengthDelimited ||
                                     MergeOneofMember(field.field_number, field.bytes, out));
    if (!ok) {
      *out = std::monostate{};
      return false;
    }
  }
  return true;
}

}  // namespace

void Encode(const ClientMessage& message, std::string* out) { EncodeOneof(message, out); }
void Encode(const DaemonMessage& message, std::string* out) { EncodeOneof(message, out); }

bool Decode(std::string_view bytes, ClientMessage* out) { return DecodeOneof(bytes, out); }
bool Decode(std::string_view bytes, DaemonMessage* out) { return DecodeOneof(bytes, out); }

}  // namespace gpuctl::wire
