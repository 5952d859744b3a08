#include "daemon/merge/trace_manifests.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "gpuctl/v1/trace_layout.h"

namespace gpuctl::merge {
namespace {

namespace fs = std::filesystem;

// A manifest is a few KiB per process; anything near this is not one.
constexpr uintmax_t kMaxManifestBytes = uintmax_t{64} << 20;

void AddManifest(const fs::path& path, TraceManifests& out) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || size > kMaxManifestBytes) {
    out.unreadable.push_back(absl::StrCat(
        path.string(), ": ", ec ? ec.message() : "larger than 64 MiB, not a manifest"));
    return;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  TraceManifestFile file{path.string(), {}};
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // a newer daemon's manifest
  const auto parsed =
      google::protobuf::util::JsonStringToMessage(text.str(), &file.manifest, options);
  if (!in || !parsed.ok()) {
    out.unreadable.push_back(
        absl::StrCat(path.string(), ": not a manifest (",
                     in ? std::string(parsed.message()) : std::string("cannot be read"), ")"));
    return;
  }
  out.manifests.push_back(std::move(file));
}

}  // namespace

TraceManifests ReadTraceManifests(const std::string& dir) {
  TraceManifests out;
  std::error_code ec;
  std::vector<fs::path> paths;
  const fs::path metadata = fs::path(dir) / std::string(layout::kMetadataDir);
  if (fs::is_directory(metadata, ec)) {
    for (const fs::directory_entry& entry : fs::directory_iterator(metadata, ec)) {
      std::error_code type_ec;
      if (entry.is_regular_file(type_ec) && entry.path().extension() == ".json") {
        paths.push_back(entry.path());
      }
    }
  }
  const fs::path legacy = fs::path(dir) / std::string(layout::kLegacyManifestName);
  if (fs::is_regular_file(legacy, ec)) paths.push_back(legacy);
  std::sort(paths.begin(), paths.end());
  for (const fs::path& path : paths) AddManifest(path, out);
  return out;
}

}  // namespace gpuctl::merge
