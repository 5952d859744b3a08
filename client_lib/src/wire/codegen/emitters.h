// The files ipc_codegen writes from a Schema. Each function returns the
// whole file's text; `include_dir` is the repo-rooted directory the
// generated headers are included from (client_lib/src/wire).
//
//   ipc_schema.h        enums, structs and datagram variants (the types
//                       ipc_messages.h exposes)
//   ipc_schema_codec.h  per-struct PutFields / MergeField declarations
//   ipc_schema_codec.cc their definitions, calls into field_codec.h
//   ipc_schema_compat.cc  for wire_compat_test only: ToProto, FromProto and
//                       RandomMember (wire_compat_support.h declares them)
#ifndef GPUCTL_CLIENT_LIB_SRC_WIRE_CODEGEN_EMITTERS_H_
#define GPUCTL_CLIENT_LIB_SRC_WIRE_CODEGEN_EMITTERS_H_

#include <string>

#include "client_lib/src/wire/codegen/schema.h"

namespace gpuctl::wire::codegen {

std::string EmitSchemaHeader(const Schema& schema, const std::string& include_dir);
std::string EmitCodecHeader(const Schema& schema, const std::string& include_dir);
std::string EmitCodecSource(const Schema& schema, const std::string& include_dir);
std::string EmitCompatSource(const Schema& schema, const std::string& include_dir);

// Shared by the emitters.
std::string Banner(const Schema& schema);
std::string IncludeGuard(const std::string& include_dir, const std::string& file);
// `comments` as // lines at `indent`, leading text first.
std::string CommentLines(const Comments& comments, const std::string& indent);
// The struct member's C++ type.
std::string CppType(FieldKind kind);

}  // namespace gpuctl::wire::codegen

#endif  // GPUCTL_CLIENT_LIB_SRC_WIRE_CODEGEN_EMITTERS_H_
