// The IPC schema as the client library's codec sees it: what the generator
// (ipc_codegen) reads out of ipc.proto's descriptor before writing the
// codec's C++ types, their encode/decode steps and the libprotobuf
// conversions of the compatibility tests.
//
// Two kinds of message: a datagram type (ClientMessage, DaemonMessage) is
// exactly one oneof whose members are messages, numbered 1..n in order; it
// becomes a std::variant whose alternative i (after std::monostate) is the
// member with field number i. Every other message becomes a plain struct of
// the field types the codec supports (ipc.proto's header lists them).
// Anything else is refused with a message naming the field, so the build
// stops instead of the codec silently dropping data.
#ifndef GPUCTL_CLIENT_LIB_SRC_WIRE_CODEGEN_SCHEMA_H_
#define GPUCTL_CLIENT_LIB_SRC_WIRE_CODEGEN_SCHEMA_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuctl::wire::codegen {

enum class FieldKind {
  kInt32,
  kInt64,
  kUint32,
  kUint64,
  kBool,
  kEnum,  // held as the raw int32 value: unknown values survive a round trip
  kString,
  kBytes,
  kRepeatedString,
};

// Comment text from the .proto, without the comment markers.
struct Comments {
  std::string leading;
  std::string trailing;
};

struct Field {
  std::string name;
  int number = 0;
  FieldKind kind = FieldKind::kInt32;
  std::string proto_enum;  // kEnum: the libprotobuf C++ enum, fully qualified
  Comments comments;
};

struct Message {
  std::string name;
  std::string proto_type;  // the libprotobuf C++ class, fully qualified
  std::vector<Field> fields;
  Comments comments;
};

struct VariantMember {
  std::string field;    // the oneof member's field name
  std::string message;  // its message (a struct) name
};

struct Variant {
  std::string name;
  std::string proto_type;
  std::vector<VariantMember> members;  // members[i] has field number i + 1
  Comments comments;
};

struct EnumValue {
  std::string name;  // kCamelCase, the enum's name prefix dropped
  int number = 0;
  Comments comments;
};

struct Enum {
  std::string name;
  std::string proto_name;  // e.g. gpuctl.v1.CaptureStatus
  std::vector<EnumValue> values;
  Comments comments;
};

struct Schema {
  std::string proto_file;  // e.g. gpuctl/v1/ipc.proto
  // Enums declared in proto_file or used by its fields, imported ones first.
  std::vector<Enum> enums;
  std::vector<Message> messages;
  std::vector<Variant> variants;
};

// Reads `proto_file` out of a FileDescriptorSet (protoc --include_imports
// --include_source_info --descriptor_set_out). INVALID_ARGUMENT naming the
// offending element when the schema uses what the codec does not support.
absl::StatusOr<Schema> LoadSchema(const std::string& descriptor_set_path,
                                  const std::string& proto_file);

// The libprotobuf C++ name of a proto full name: a.b.C -> ::a::b::C.
std::string CppQualifiedName(const std::string& proto_full_name);

}  // namespace gpuctl::wire::codegen

#endif  // GPUCTL_CLIENT_LIB_SRC_WIRE_CODEGEN_SCHEMA_H_
