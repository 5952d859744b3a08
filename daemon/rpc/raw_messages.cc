#include "daemon/rpc/raw_messages.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "google/protobuf/unknown_field_set.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace gpuctl::daemon {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// Messages nest no deeper than this in gpuctl's requests; deeper bytes are
// not looked into.
constexpr int kMaxDepth = 16;

// Whether `text` is well-formed UTF-8: no overlong forms, no surrogates,
// nothing past U+10FFFF (what protobuf requires of a string field).
bool IsValidUtf8(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    size_t length = 0;
    uint32_t code = 0;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xe0) == 0xc0) {
      length = 2;
      code = lead & 0x1f;
    } else if ((lead & 0xf0) == 0xe0) {
      length = 3;
      code = lead & 0x0f;
    } else if ((lead & 0xf8) == 0xf0) {
      length = 4;
      code = lead & 0x07;
    } else {
      return false;
    }
    if (i + length > text.size()) return false;
    for (size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      code = (code << 6) | (next & 0x3f);
    }
    static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kSmallest[length] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
      return false;
    }
    i += length;
  }
  return true;
}

std::string Describe(const Descriptor& type, absl::string_view bytes, int depth) {
  UnknownFieldSet fields;
  if (!fields.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return "the bytes are not protobuf wire format: garbage or truncated";
  }
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& field = fields.field(i);
    const FieldDescriptor* known = type.FindFieldByNumber(field.number());
    if (known == nullptr || field.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
    const std::string& value = field.length_delimited();
    if (known->type() == FieldDescriptor::TYPE_STRING && !IsValidUtf8(value)) {
      return absl::StrCat("field ", known->name(), " is not valid UTF-8");
    }
    if (known->type() == FieldDescriptor::TYPE_MESSAGE && depth < kMaxDepth) {
      std::string inner = Describe(*known->message_type(), value, depth + 1);
      if (!inner.empty()) return absl::StrCat("field ", known->name(), ": ", inner);
    }
  }
  return "";
}

// The bytes of `buffer`, in one piece.
std::string Flatten(const grpc::ByteBuffer& buffer) {
  grpc::ByteBuffer copy(buffer);  // shares the slices
  grpc::ProtoBufferReader reader(&copy);
  std::string bytes;
  const void* data = nullptr;
  int size = 0;
  while (reader.Next(&data, &size)) bytes.append(static_cast<const char*>(data), size);
  return bytes;
}

}  // namespace

std::string DescribeParseFailure(const Descriptor& type, absl::string_view bytes) {
  return Describe(type, bytes, 0);
}

absl::Status ParseRequest(absl::string_view method, const grpc::ByteBuffer& bytes,
                          google::protobuf::Message* request) {
  grpc::ByteBuffer copy(bytes);  // shares the slices
  grpc::ProtoBufferReader reader(&copy);
  if (reader.status().ok() && request->ParseFromZeroCopyStream(&reader)) {
    return absl::OkStatus();
  }
  std::string why = DescribeParseFailure(*request->GetDescriptor(), Flatten(bytes));
  if (why.empty()) why = "its bytes do not match the type's fields";
  return absl::InvalidArgumentError(absl::StrCat(
      method, " request: not a valid ", request->GetDescriptor()->full_name(), " (", why, ")"));
}

grpc::ByteBuffer SerializeReply(const google::protobuf::Message& message) {
  grpc::ByteBuffer bytes;
  bool own_buffer = false;
  // Fails only past 2 GiB, which no reply of gpuctl's comes near.
  if (!grpc::SerializationTraits<google::protobuf::Message>::Serialize(message, &bytes, &own_buffer)
           .ok()) {
    bytes.Clear();
  }
  return bytes;
}

}  // namespace gpuctl::daemon
