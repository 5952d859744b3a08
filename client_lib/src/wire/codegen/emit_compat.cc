// Conversions between the codec's types and libprotobuf's, and random
// messages, for the differential tests (wire_compat_test): generated so
// that a field added to ipc.proto is covered by them with no edit.
#include "absl/strings/str_cat.h"
#include "client_lib/src/wire/codegen/emitters.h"

namespace gpuctl::wire::codegen {
namespace {

std::string FillStatement(const Field& f) {
  switch (f.kind) {
    case FieldKind::kRepeatedString:
      return absl::StrCat("  for (const std::string& value : in.", f.name, ") out->add_", f.name,
                          "(value);\n");
    case FieldKind::kEnum:
      return absl::StrCat("  out->set_", f.name, "(static_cast<", f.proto_enum, ">(in.", f.name,
                          "));\n");
    default:
      return absl::StrCat("  out->set_", f.name, "(in.", f.name, ");\n");
  }
}

std::string ConvertStatement(const Field& f) {
  if (f.kind == FieldKind::kRepeatedString) {
    return absl::StrCat("  out.", f.name, ".assign(in.", f.name, "().begin(), in.", f.name,
                        "().end());\n");
  }
  return absl::StrCat("  out.", f.name, " = in.", f.name, "();\n");
}

std::string RandomValue(FieldKind kind) {
  switch (kind) {
    case FieldKind::kInt32:
    case FieldKind::kEnum:  // values past the enum's too: they must survive
      return "Int32()";
    case FieldKind::kInt64:
      return "Int64()";
    case FieldKind::kUint32:
      return "Uint32()";
    case FieldKind::kUint64:
      return "Uint64()";
    case FieldKind::kBool:
      return "Bool()";
    case FieldKind::kString:
      return "Utf8String()";
    case FieldKind::kBytes:
      return "Binary()";
    case FieldKind::kRepeatedString:
      return "Utf8Strings()";
  }
  return "";
}

std::string EmitMessageHelpers(const Message& m) {
  std::string out = absl::StrCat("void Fill(const ", m.name, "& in, ", m.proto_type, "* out) {\n");
  for (const Field& f : m.fields) absl::StrAppend(&out, FillStatement(f));
  absl::StrAppend(&out, "}\n\n", m.name, " Convert(const ", m.proto_type, "& in) {\n  ", m.name,
                  " out;\n");
  for (const Field& f : m.fields) absl::StrAppend(&out, ConvertStatement(f));
  absl::StrAppend(&out, "  return out;\n}\n\nvoid Randomize(RandomMessages& random, ", m.name,
                  "* out) {\n");
  for (const Field& f : m.fields) {
    absl::StrAppend(&out, "  out->", f.name, " = random.", RandomValue(f.kind), ";\n");
  }
  absl::StrAppend(&out, "}\n\n");
  return out;
}

std::string EmitToProto(const Variant& v) {
  std::string out = absl::StrCat(v.proto_type, " ToProto(const ", v.name, "& message) {\n  ",
                                 v.proto_type, " out;\n");
  for (const VariantMember& member : v.members) {
    absl::StrAppend(&out, "  if (const auto* m = std::get_if<", member.message,
                    ">(&message)) Fill(*m, out.mutable_", member.field, "());\n");
  }
  absl::StrAppend(&out, "  return out;\n}\n\n");
  return out;
}

std::string EmitFromProto(const Variant& v) {
  std::string out = absl::StrCat(v.name, " FromProto(const ", v.proto_type, "& message) {\n");
  for (const VariantMember& member : v.members) {
    absl::StrAppend(&out, "  if (message.has_", member.field, "()) return Convert(message.",
                    member.field, "());\n");
  }
  absl::StrAppend(&out, "  return std::monostate{};\n}\n\n");
  return out;
}

std::string EmitRandomMember(const Variant& v) {
  std::string out = absl::StrCat("void RandomMember(RandomMessages& random, uint64_t index, ",
                                 v.name, "* out) {\n  switch (index) {\n");
  for (size_t i = 0; i < v.members.size(); ++i) {
    absl::StrAppend(&out, "    case ", i + 1, ": {\n      ", v.members[i].message,
                    " m;\n      Randomize(random, &m);\n      *out = std::move(m);\n",
                    "      return;\n    }\n");
  }
  absl::StrAppend(&out, "    default:\n      *out = std::monostate{};\n  }\n}\n\n");
  return out;
}

}  // namespace

std::string EmitCompatSource(const Schema& schema, const std::string& include_dir) {
  std::string out = Banner(schema);
  absl::StrAppend(&out, "#include <string>\n#include <utility>\n\n#include \"", include_dir,
                  "/wire_compat_support.h\"\n\nnamespace gpuctl::wire::testing {\nnamespace {\n\n");
  for (const Message& m : schema.messages) absl::StrAppend(&out, EmitMessageHelpers(m));
  absl::StrAppend(&out, "}  // namespace\n\n");
  for (const Variant& v : schema.variants) {
    absl::StrAppend(&out, EmitToProto(v), EmitFromProto(v), EmitRandomMember(v));
  }
  absl::StrAppend(&out, "}  // namespace gpuctl::wire::testing\n");
  return out;
}

}  // namespace gpuctl::wire::codegen
