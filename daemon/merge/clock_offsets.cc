#include "daemon/merge/clock_offsets.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "gpuctl/v1/manifest.pb.h"
#include "gpuctl/v1/trace_layout.h"

namespace gpuctl::merge {
namespace {

namespace fs = std::filesystem;

// A manifest is a few KiB per process; anything near this is not one.
constexpr uintmax_t kMaxManifestBytes = uintmax_t{64} << 20;

void AddManifest(const fs::path& path, ManifestClocks& clocks) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || size > kMaxManifestBytes) {
    clocks.warnings.push_back(absl::StrCat(path.string(), ": ",
                                           ec ? ec.message() : "larger than 64 MiB, not a manifest",
                                           "; its host's ranks keep their own clock"));
    return;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  v1::TraceManifest manifest;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // a newer daemon's manifest
  const auto parsed = google::protobuf::util::JsonStringToMessage(text.str(), &manifest, options);
  if (!in || !parsed.ok()) {
    clocks.warnings.push_back(
        absl::StrCat(path.string(), ": not a manifest (",
                     in ? std::string(parsed.message()) : std::string("cannot be read"),
                     "); its host's ranks keep their own clock"));
    return;
  }
  if (!manifest.has_clock()) {
    clocks.warnings.push_back(absl::StrCat(path.string(), ": host ", manifest.host(),
                                           " recorded no clock offset (the request carried no "
                                           "caller time); its ranks keep their own clock"));
    return;
  }
  const HostClock clock{
      manifest.host(), path.string(),
      google::protobuf::util::TimeUtil::DurationToNanoseconds(manifest.clock().offset())};
  for (const v1::ProcessResult& result : manifest.results()) {
    if (!result.file().empty()) clocks.by_file.emplace(result.file(), clock);
  }
  if (!manifest.host().empty()) clocks.by_host.emplace(manifest.host(), clock);
}

}  // namespace

void ReadManifestClocks(const std::string& dir, ManifestClocks& clocks) {
  std::error_code ec;
  std::vector<fs::path> manifests;
  const fs::path metadata = fs::path(dir) / std::string(layout::kMetadataDir);
  if (fs::is_directory(metadata, ec)) {
    for (const fs::directory_entry& entry : fs::directory_iterator(metadata, ec)) {
      std::error_code type_ec;
      if (entry.is_regular_file(type_ec) && entry.path().extension() == ".json") {
        manifests.push_back(entry.path());
      }
    }
  }
  const fs::path legacy = fs::path(dir) / std::string(layout::kLegacyManifestName);
  if (fs::is_regular_file(legacy, ec)) manifests.push_back(legacy);
  std::sort(manifests.begin(), manifests.end());
  for (const fs::path& path : manifests) AddManifest(path, clocks);
}

}  // namespace gpuctl::merge
