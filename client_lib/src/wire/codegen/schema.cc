#include "client_lib/src/wire/codegen/schema.h"

#include <cctype>
#include <fstream>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"

namespace gpuctl::wire::codegen {
namespace {

namespace gp = ::google::protobuf;

template <typename Descriptor>
Comments CommentsOf(const Descriptor* d) {
  gp::SourceLocation location;
  if (!d->GetSourceLocation(&location)) return {};
  return {location.leading_comments, location.trailing_comments};
}

// CaptureStatus -> CAPTURE_STATUS
std::string UpperSnake(const std::string& camel) {
  std::string out;
  for (size_t i = 0; i < camel.size(); ++i) {
    if (i > 0 && std::isupper(static_cast<unsigned char>(camel[i]))) out.push_back('_');
    out.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(camel[i]))));
  }
  return out;
}

// CAPTURE_STATUS_TIMED_OUT in CaptureStatus -> kTimedOut
std::string EnumValueName(const gp::EnumValueDescriptor* value) {
  std::string name = value->name();
  const std::string prefix = UpperSnake(value->type()->name()) + "_";
  if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0) {
    name = name.substr(prefix.size());
  }
  std::string out = "k";
  bool upper = true;
  for (char c : name) {
    if (c == '_') {
      upper = true;
      continue;
    }
    const auto u = static_cast<unsigned char>(c);
    out.push_back(static_cast<char>(upper ? std::toupper(u) : std::tolower(u)));
    upper = false;
  }
  return out;
}

Enum MakeEnum(const gp::EnumDescriptor* d) {
  Enum out{d->name(), d->full_name(), {}, CommentsOf(d)};
  for (int i = 0; i < d->value_count(); ++i) {
    const gp::EnumValueDescriptor* v = d->value(i);
    out.values.push_back({EnumValueName(v), v->number(), CommentsOf(v)});
  }
  return out;
}

absl::Status Unsupported(const gp::FieldDescriptor* f, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(f->full_name(), ": ", why,
                   "; the client library codec supports int32, int64, uint32, uint64, bool, "
                   "enum, string, bytes and repeated string fields, and messages only as "
                   "members of a datagram oneof (client_lib/src/wire/codegen/schema.h)"));
}

absl::StatusOr<FieldKind> ScalarKind(const gp::FieldDescriptor* f) {
  switch (f->type()) {
    case gp::FieldDescriptor::TYPE_INT32:
      return FieldKind::kInt32;
    case gp::FieldDescriptor::TYPE_INT64:
      return FieldKind::kInt64;
    case gp::FieldDescriptor::TYPE_UINT32:
      return FieldKind::kUint32;
    case gp::FieldDescriptor::TYPE_UINT64:
      return FieldKind::kUint64;
    case gp::FieldDescriptor::TYPE_BOOL:
      return FieldKind::kBool;
    case gp::FieldDescriptor::TYPE_ENUM:
      return FieldKind::kEnum;
    case gp::FieldDescriptor::TYPE_STRING:
      return FieldKind::kString;
    case gp::FieldDescriptor::TYPE_BYTES:
      return FieldKind::kBytes;
    default:
      return Unsupported(f, absl::StrCat("type ", f->type_name(), " is not supported"));
  }
}

absl::StatusOr<Field> MakeField(const gp::FieldDescriptor* f) {
  absl::StatusOr<FieldKind> kind = ScalarKind(f);
  if (!kind.ok()) return kind.status();
  if (f->containing_oneof() != nullptr || f->has_presence()) {
    return Unsupported(f, "oneof and optional fields are not supported outside a datagram");
  }
  if (f->is_repeated()) {
    if (*kind != FieldKind::kString) return Unsupported(f, "only strings may be repeated");
    kind = FieldKind::kRepeatedString;
  }
  Field out{f->name(), f->number(), *kind, "", CommentsOf(f)};
  if (*kind == FieldKind::kEnum) out.proto_enum = CppQualifiedName(f->enum_type()->full_name());
  return out;
}

absl::StatusOr<Message> MakeMessage(const gp::Descriptor* d) {
  Message out{d->name(), CppQualifiedName(d->full_name()), {}, CommentsOf(d)};
  if (d->nested_type_count() > 0 || d->enum_type_count() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        d->full_name(), ": nested types are not supported by the client library codec"));
  }
  for (int i = 0; i < d->field_count(); ++i) {
    absl::StatusOr<Field> field = MakeField(d->field(i));
    if (!field.ok()) return field.status();
    out.fields.push_back(*std::move(field));
  }
  return out;
}

// A datagram type: one oneof holding every field, each an embedded message.
bool IsDatagram(const gp::Descriptor* d) {
  if (d->oneof_decl_count() != 1 || d->field_count() == 0) return false;
  for (int i = 0; i < d->field_count(); ++i) {
    if (d->field(i)->containing_oneof() != d->oneof_decl(0) ||
        d->field(i)->type() != gp::FieldDescriptor::TYPE_MESSAGE) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<Variant> MakeVariant(const gp::Descriptor* d) {
  Variant out{d->name(), CppQualifiedName(d->full_name()), {}, CommentsOf(d)};
  for (int i = 0; i < d->field_count(); ++i) {
    const gp::FieldDescriptor* f = d->field(i);
    if (f->number() != i + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(f->full_name(),
                       ": datagram oneof members must be numbered 1, 2, ... in order (the "
                       "number is the std::variant alternative)"));
    }
    if (f->message_type()->file() != d->file() || IsDatagram(f->message_type())) {
      return Unsupported(f, "a datagram member must be a plain message of the same file");
    }
    out.members.push_back({f->name(), f->message_type()->name()});
  }
  return out;
}

}  // namespace
namespace {

absl::StatusOr<const gp::FileDescriptor*> BuildPool(const std::string& path,
                                                    const std::string& proto_file,
                                                    gp::DescriptorPool* pool) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  gp::FileDescriptorSet set;
  if (!set.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a FileDescriptorSet"));
  }
  // protoc --include_imports writes dependencies before their users.
  for (const gp::FileDescriptorProto& file : set.file()) {
    if (pool->BuildFile(file) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": cannot build ", file.name()));
    }
  }
  const gp::FileDescriptor* file = pool->FindFileByName(proto_file);
  if (file == nullptr) return absl::NotFoundError(absl::StrCat(proto_file, " is not in ", path));
  return file;
}

// Enums the structs use from other files (in order of first use), then the
// file's own, as declared.
std::vector<const gp::EnumDescriptor*> EnumsOf(const gp::FileDescriptor* file) {
  std::vector<const gp::EnumDescriptor*> out;
  auto add = [&out](const gp::EnumDescriptor* e) {
    for (const gp::EnumDescriptor* seen : out) {
      if (seen == e) return;
    }
    out.push_back(e);
  };
  for (int m = 0; m < file->message_type_count(); ++m) {
    const gp::Descriptor* d = file->message_type(m);
    for (int f = 0; f < d->field_count(); ++f) {
      const gp::EnumDescriptor* e = d->field(f)->enum_type();
      if (e != nullptr && e->file() != file) add(e);
    }
  }
  for (int e = 0; e < file->enum_type_count(); ++e) add(file->enum_type(e));
  return out;
}

}  // namespace

std::string CppQualifiedName(const std::string& proto_full_name) {
  return "::" + absl::StrReplaceAll(proto_full_name, {{".", "::"}});
}

absl::StatusOr<Schema> LoadSchema(const std::string& descriptor_set_path,
                                  const std::string& proto_file) {
  gp::DescriptorPool pool;
  absl::StatusOr<const gp::FileDescriptor*> file =
      BuildPool(descriptor_set_path, proto_file, &pool);
  if (!file.ok()) return file.status();
  Schema schema{proto_file, {}, {}, {}};
  for (const gp::EnumDescriptor* e : EnumsOf(*file)) schema.enums.push_back(MakeEnum(e));
  for (int i = 0; i < (*file)->message_type_count(); ++i) {
    const gp::Descriptor* d = (*file)->message_type(i);
    if (IsDatagram(d)) {
      absl::StatusOr<Variant> variant = MakeVariant(d);
      if (!variant.ok()) return variant.status();
      schema.variants.push_back(*std::move(variant));
    } else {
      absl::StatusOr<Message> message = MakeMessage(d);
      if (!message.ok()) return message.status();
      schema.messages.push_back(*std::move(message));
    }
  }
  return schema;
}

}  // namespace gpuctl::wire::codegen
