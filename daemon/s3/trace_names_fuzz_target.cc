// libFuzzer entry point for the names that become paths and object keys:
// trace ids (IsValidTraceId), store file names (IsValidStoreFileName) and
// bucket keys (TraceObjectKey / ParseTraceObjectKey). The input is
// "<prefix>\n<rest>"; the whole input is also tried as an id and a name.
// Invariants:
//  - a valid id is canonical (36 chars, lowercase, version 7) and has a time;
//  - a valid file name can never leave its directory; the bucket layout
//    accepts exactly the local store's names and the manifest paths
//    "_gpuctl/<host>.json" (layout::IsTraceFilePath), whose one slash
//    leads into a directory of manifests only;
//  - a parsed key names a valid id and file and is rebuilt byte for byte;
//  - a key built from (prefix, id = first 36 bytes of rest, file = the
//    remainder) parses back to the same id and file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "daemon/common/trace_id.h"
#include "daemon/s3/s3_config.h"
#include "daemon/s3/trace_object_key.h"
#include "daemon/store/local_store.h"
#include "gpuctl/v1/trace_layout.h"

namespace {

// Any valid UUIDv7, to test file names on their own in the bucket layout.
constexpr absl::string_view kSomeTraceId = "0190c3a2-7b1e-7c4d-9a2b-3c4d5e6f7a8b";

void CheckTraceId(absl::string_view id) {
  if (!gpuctl::IsValidTraceId(id)) {
    if (gpuctl::TraceIdTime(id).ok()) std::abort();
    return;
  }
  if (id.size() != gpuctl::kTraceIdLength || absl::AsciiStrToLower(id) != id || id[14] != '7') {
    std::abort();
  }
  if (!gpuctl::TraceIdTime(id).ok()) std::abort();
}

void CheckFileName(absl::string_view name) {
  const bool valid = gpuctl::daemon::IsValidStoreFileName(name);
  if (valid &&
      (name.empty() || name.size() > 255 || name.front() == '.' ||
       name.find('/') != absl::string_view::npos || name.find('\0') != absl::string_view::npos)) {
    std::abort();
  }
  const bool manifest_path = !gpuctl::layout::ManifestPathHost(name).empty();
  if (manifest_path) {
    // "_gpuctl/" and a valid file name ending in ".json", nothing else.
    const absl::string_view file = name.substr(name.find('/') + 1);
    if (valid || name.substr(0, 8) != "_gpuctl/" || !gpuctl::daemon::IsValidStoreFileName(file) ||
        file.size() <= 5 || file.substr(file.size() - 5) != ".json") {
      std::abort();
    }
  }
  if (gpuctl::s3::TraceObjectKey("", kSomeTraceId, name).ok() != (valid || manifest_path)) {
    std::abort();
  }
}

void CheckKey(absl::string_view prefix, absl::string_view key) {
  if (auto parsed = gpuctl::s3::ParseTraceObjectKey(prefix, key)) {
    if (!gpuctl::IsValidTraceId(parsed->trace_id) ||
        !gpuctl::layout::IsTraceFilePath(parsed->file)) {
      std::abort();
    }
    if (gpuctl::s3::ValidateKeyPrefix(prefix).ok()) {
      auto rebuilt = gpuctl::s3::TraceObjectKey(prefix, parsed->trace_id, parsed->file);
      if (!rebuilt.ok() || *rebuilt != key) std::abort();
    }
  }
  if (key.size() < gpuctl::kTraceIdLength) return;
  const absl::string_view id = key.substr(0, gpuctl::kTraceIdLength);
  const absl::string_view file = key.substr(gpuctl::kTraceIdLength);
  auto built = gpuctl::s3::TraceObjectKey(prefix, id, file);
  if (!built.ok()) return;
  auto back = gpuctl::s3::ParseTraceObjectKey(prefix, *built);
  if (!back || back->trace_id != id || back->file != file) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);  // NOLINT
  CheckTraceId(input);
  CheckFileName(input);
  const size_t newline = input.find('\n');
  if (newline == absl::string_view::npos) {
    CheckKey("", input);
  } else {
    CheckKey(input.substr(0, newline), input.substr(newline + 1));
  }
  return 0;
}
