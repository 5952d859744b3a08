// The codec's types and per-message encode/decode steps.
#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client_lib/src/wire/codegen/emitters.h"

namespace gpuctl::wire::codegen {
namespace {

std::string DefaultValue(FieldKind kind) {
  switch (kind) {
    case FieldKind::kBool:
      return " = false";
    case FieldKind::kString:
    case FieldKind::kBytes:
    case FieldKind::kRepeatedString:
      return "";
    default:
      return " = 0";
  }
}

// Enum-typed members are int32_t; the note names the enum.
std::string EnumNote(const Field& f) {
  if (f.kind != FieldKind::kEnum) return "";
  const size_t last = f.proto_enum.rfind("::");
  return absl::StrCat("  // ", f.proto_enum.substr(last + 2), ", the raw value");
}

std::string EmitEnum(const Enum& e) {
  std::string out = CommentLines(e.comments, "");
  absl::StrAppend(&out, "// ", e.proto_name, "\nenum class ", e.name, " : int32_t {\n");
  for (const EnumValue& v : e.values) {
    absl::StrAppend(&out, CommentLines(v.comments, "  "), "  ", v.name, " = ", v.number, ",\n");
  }
  absl::StrAppend(&out, "};\n\n");
  return out;
}

std::string EmitStruct(const Message& m) {
  std::string out = CommentLines(m.comments, "");
  absl::StrAppend(&out, "struct ", m.name, " {\n");
  for (const Field& f : m.fields) {
    absl::StrAppend(&out, CommentLines(f.comments, "  "), "  ", CppType(f.kind), " ", f.name,
                    DefaultValue(f.kind), ";", EnumNote(f), "\n");
  }
  absl::StrAppend(&out, "  bool operator==(const ", m.name, "&) const = default;\n};\n\n");
  return out;
}

std::string EmitVariant(const Variant& v) {
  std::string out = CommentLines(v.comments, "");
  absl::StrAppend(&out, "// Alternative i is the oneof member with field number i; an empty\n",
                  "// oneof is std::monostate.\nusing ", v.name, " = std::variant<std::monostate");
  for (const VariantMember& member : v.members) absl::StrAppend(&out, ", ", member.message);
  absl::StrAppend(&out, ">;\n\n");
  return out;
}

// Decoding step for one field, by kind.
std::string MergeCall(const Field& f) {
  const std::string target = absl::StrCat("(field, &message->", f.name, ")");
  switch (f.kind) {
    case FieldKind::kString:
    case FieldKind::kRepeatedString:
      return "MergeString" + target;
    case FieldKind::kBytes:
      return "MergeBytes" + target;
    default:
      return "MergeField" + target;
  }
}

std::string EmitPut(const Message& m) {
  // libprotobuf writes fields in field-number order; so must the codec.
  std::vector<Field> fields = m.fields;
  std::sort(fields.begin(), fields.end(),
            [](const Field& a, const Field& b) { return a.number < b.number; });
  std::string out = absl::StrCat("template <typename Sink>\nvoid Put(Sink& sink, const ", m.name,
                                 "& message) {\n");
  for (const Field& f : fields) {
    absl::StrAppend(&out, "  PutField(sink, ", f.number, ", message.", f.name, ");\n");
  }
  absl::StrAppend(&out, "}\n\n");
  return out;
}

std::string EmitMerge(const Message& m) {
  std::string out = absl::StrCat("bool MergeField(const WireField& field, ", m.name,
                                 "* message) {\n  switch (field.field_number) {\n");
  for (const Field& f : m.fields) {
    absl::StrAppend(&out, "    case ", f.number, ":  // ", f.name, "\n      return ", MergeCall(f),
                    ";\n");
  }
  absl::StrAppend(&out, "    default:  // unknown to this schema: skipped\n",
                  "      return true;\n  }\n}\n\n");
  return out;
}

}  // namespace

std::string Banner(const Schema& schema) {
  return absl::StrCat("// Generated from ", schema.proto_file,
                      " by client_lib/src/wire/codegen (ipc_codegen). Do not edit:\n",
                      "// change the .proto and rebuild.\n");
}

std::string IncludeGuard(const std::string& include_dir, const std::string& file) {
  std::string guard = "GPUCTL_";
  for (char c : include_dir + "/" + file) {
    guard.push_back(std::isalnum(static_cast<unsigned char>(c))
                        ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                        : '_');
  }
  return guard + "_";
}

std::string CommentLines(const Comments& comments, const std::string& indent) {
  std::string out;
  for (const std::string* text : {&comments.leading, &comments.trailing}) {
    if (text->empty()) continue;
    for (absl::string_view line : absl::StrSplit(absl::StripSuffix(*text, "\n"), '\n')) {
      absl::StrAppend(&out, indent, "//", line, "\n");
    }
  }
  return out;
}

std::string CppType(FieldKind kind) {
  switch (kind) {
    case FieldKind::kInt32:
    case FieldKind::kEnum:
      return "int32_t";
    case FieldKind::kInt64:
      return "int64_t";
    case FieldKind::kUint32:
      return "uint32_t";
    case FieldKind::kUint64:
      return "uint64_t";
    case FieldKind::kBool:
      return "bool";
    case FieldKind::kString:
    case FieldKind::kBytes:
      return "std::string";
    case FieldKind::kRepeatedString:
      return "std::vector<std::string>";
  }
  return "";
}

std::string EmitSchemaHeader(const Schema& schema, const std::string& include_dir) {
  const std::string guard = IncludeGuard(include_dir, "ipc_schema.h");
  std::string out = Banner(schema);
  absl::StrAppend(&out, "// The IPC schema as plain C++ types; enum-typed fields hold the raw\n",
                  "// value, so one a newer peer sends is kept as sent.\n#ifndef ", guard,
                  "\n#define ", guard, "\n\n#include <cstdint>\n#include <string>\n",
                  "#include <variant>\n#include <vector>\n\nnamespace gpuctl::wire {\n\n");
  for (const Enum& e : schema.enums) absl::StrAppend(&out, EmitEnum(e));
  for (const Message& m : schema.messages) absl::StrAppend(&out, EmitStruct(m));
  for (const Variant& v : schema.variants) absl::StrAppend(&out, EmitVariant(v));
  absl::StrAppend(&out, "}  // namespace gpuctl::wire\n\n#endif  // ", guard, "\n");
  return out;
}

std::string EmitCodecHeader(const Schema& schema, const std::string& include_dir) {
  const std::string guard = IncludeGuard(include_dir, "ipc_schema_codec.h");
  std::string out = Banner(schema);
  absl::StrAppend(&out,
                  "// Per message: PutFields writes its fields (proto3 rules, field_codec.h)\n",
                  "// to a sink; MergeField applies one decoded field, false only for a\n",
                  "// string that is not valid UTF-8.\n#ifndef ", guard, "\n#define ", guard,
                  "\n\n#include \"", include_dir, "/ipc_schema.h\"\n#include \"", include_dir,
                  "/wire_format.h\"\n\nnamespace gpuctl::wire::codec {\n\n");
  for (const Message& m : schema.messages) {
    absl::StrAppend(&out, "void PutFields(SizeSink& sink, const ", m.name, "& message);\n",
                    "void PutFields(StringSink& sink, const ", m.name, "& message);\n",
                    "bool MergeField(const WireField& field, ", m.name, "* message);\n\n");
  }
  absl::StrAppend(&out, "}  // namespace gpuctl::wire::codec\n\n#endif  // ", guard, "\n");
  return out;
}

std::string EmitCodecSource(const Schema& schema, const std::string& include_dir) {
  std::string out = Banner(schema);
  absl::StrAppend(&out, "#include \"", include_dir, "/ipc_schema_codec.h\"\n\n#include \"",
                  include_dir,
                  "/field_codec.h\"\n\nnamespace gpuctl::wire::codec {\nnamespace {\n\n");
  for (const Message& m : schema.messages) absl::StrAppend(&out, EmitPut(m));
  absl::StrAppend(&out, "}  // namespace\n\n");
  for (const Message& m : schema.messages) {
    absl::StrAppend(&out, "void PutFields(SizeSink& sink, const ", m.name,
                    "& message) { Put(sink, message); }\n",
                    "void PutFields(StringSink& sink, const ", m.name,
                    "& message) { Put(sink, message); }\n\n", EmitMerge(m));
  }
  absl::StrAppend(&out, "}  // namespace gpuctl::wire::codec\n");
  return out;
}

}  // namespace gpuctl::wire::codegen
