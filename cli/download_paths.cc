#include "cli/download_paths.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cli/format.h"
#include "gpuctl/v1/trace_layout.h"

namespace gpuctl::cli {
namespace {

constexpr size_t kMaxNameBytes = 255;
// "." before the name and ".XXXXXX" after it.
constexpr absl::string_view kTemporarySuffix = ".XXXXXX";
constexpr size_t kMaxTemporaryStem = kMaxNameBytes - 1 - kTemporarySuffix.size();

absl::Status UnsafeName(absl::string_view what, absl::string_view name) {
  return absl::InvalidArgumentError(absl::StrCat("unsafe ", what, " \"", Printable(name), "\""));
}

std::string Join(absl::string_view directory, absl::string_view name) {
  if (!directory.empty() && directory.back() == '/') return absl::StrCat(directory, name);
  return absl::StrCat(directory, "/", name);
}

}  // namespace

bool IsSafeName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

bool IsSafeTracePath(absl::string_view path) {
  // "_gpuctl" itself is the manifests' directory, never a file.
  return (IsSafeName(path) && path != layout::kMetadataDir) ||
         !layout::ManifestPathHost(path).empty();
}

absl::StatusOr<SaveLocation> LocateSavedFile(absl::string_view directory, absl::string_view path) {
  if (!IsSafeTracePath(path)) return UnsafeName("file name", path);
  if (IsSafeName(path)) return SaveLocation{std::string(directory), std::string(path)};
  absl::string_view host = layout::ManifestPathHost(path);
  if (host.empty()) return UnsafeName("file name", path);
  return SaveLocation{Join(directory, layout::kMetadataDir),
                      absl::StrCat(host, layout::kManifestSuffix)};
}

absl::StatusOr<std::string> TraceDirectory(absl::string_view output_root,
                                           absl::string_view trace_id) {
  if (output_root.empty()) return absl::InvalidArgumentError("empty output directory");
  if (!IsSafeName(trace_id)) return UnsafeName("trace id", trace_id);
  return Join(output_root, trace_id);
}

absl::StatusOr<std::string> SavedFilePath(absl::string_view directory, absl::string_view name) {
  if (!IsSafeName(name)) return UnsafeName("file name", name);
  return Join(directory, name);
}

absl::StatusOr<std::string> TemporaryFileTemplate(absl::string_view directory,
                                                  absl::string_view name) {
  if (!IsSafeName(name)) return UnsafeName("file name", name);
  return Join(directory, absl::StrCat(".", name.substr(0, kMaxTemporaryStem), kTemporarySuffix));
}

}  // namespace gpuctl::cli
