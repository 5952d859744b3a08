#include "daemon/merge/clock_offsets.h"

#include "absl/strings/str_cat.h"
#include "daemon/merge/trace_manifests.h"
#include "google/protobuf/util/time_util.h"
#include "gpuctl/v1/manifest.pb.h"

namespace gpuctl::merge {

void ReadManifestClocks(const std::string& dir, ManifestClocks& clocks) {
  const TraceManifests read = ReadTraceManifests(dir);
  for (const std::string& why : read.unreadable) {
    clocks.warnings.push_back(absl::StrCat(why, "; its host's ranks keep their own clock"));
  }
  for (const TraceManifestFile& file : read.manifests) {
    const v1::TraceManifest& manifest = file.manifest;
    if (!manifest.has_clock()) {
      clocks.warnings.push_back(absl::StrCat(file.path, ": host ", manifest.host(),
                                             " recorded no clock offset (the request carried no "
                                             "caller time); its ranks keep their own clock"));
      continue;
    }
    const HostClock clock{
        manifest.host(), file.path,
        google::protobuf::util::TimeUtil::DurationToNanoseconds(manifest.clock().offset())};
    for (const v1::ProcessResult& result : manifest.results()) {
      if (!result.file().empty()) clocks.by_file.emplace(result.file(), clock);
    }
    if (!manifest.host().empty()) clocks.by_host.emplace(manifest.host(), clock);
  }
}

}  // namespace gpuctl::merge
