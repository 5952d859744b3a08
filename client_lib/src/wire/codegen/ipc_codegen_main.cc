// ipc_codegen DESCRIPTOR_SET PROTO_FILE OUT_DIR INCLUDE_DIR
//
// Writes the client library's IPC codec for PROTO_FILE (as named inside
// DESCRIPTOR_SET, e.g. gpuctl/v1/ipc.proto) into OUT_DIR; INCLUDE_DIR is the
// repo-rooted directory the generated files are included as. A file whose
// content is unchanged is left alone, so its dependents are not rebuilt.
// Exits 1 with a message naming the offending element when the schema uses
// what the codec does not support.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "client_lib/src/wire/codegen/emitters.h"
#include "client_lib/src/wire/codegen/schema.h"

namespace {

bool WriteIfChanged(const std::string& path, const std::string& content) {
  {
    std::ifstream in(path, std::ios::binary);
    const std::string old((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in && old == content) return true;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) std::fprintf(stderr, "ipc_codegen: cannot write %s\n", path.c_str());
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  namespace codegen = gpuctl::wire::codegen;
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s DESCRIPTOR_SET PROTO_FILE OUT_DIR INCLUDE_DIR\n", argv[0]);
    return 2;
  }
  const absl::StatusOr<codegen::Schema> schema = codegen::LoadSchema(argv[1], argv[2]);
  if (!schema.ok()) {
    std::fprintf(stderr, "ipc_codegen: %s\n", std::string(schema.status().message()).c_str());
    return 1;
  }
  const std::string out_dir = argv[3];
  const std::string include_dir = argv[4];
  const bool ok =
      WriteIfChanged(out_dir + "/ipc_schema.h", codegen::EmitSchemaHeader(*schema, include_dir)) &&
      WriteIfChanged(out_dir + "/ipc_schema_codec.h",
                     codegen::EmitCodecHeader(*schema, include_dir)) &&
      WriteIfChanged(out_dir + "/ipc_schema_codec.cc",
                     codegen::EmitCodecSource(*schema, include_dir)) &&
      WriteIfChanged(out_dir + "/ipc_schema_compat.cc",
                     codegen::EmitCompatSource(*schema, include_dir));
  return ok ? 0 : 1;
}
