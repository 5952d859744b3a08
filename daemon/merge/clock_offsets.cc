#include "daemon/merge/clock_offsets.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/merge/trace_manifests.h"
#include "google/protobuf/util/time_util.h"
#include "gpuctl/v1/manifest.pb.h"

namespace gpuctl::merge {
namespace {

using google::protobuf::util::TimeUtil;

// The longest round trip taken as a measurement, as gpuctld refuses
// longer ones (kMaxProbeRoundTrip); a manifest edited past it is read as
// one without.
constexpr int64_t kMaxRoundTripNs = int64_t{60} * 1'000'000'000;

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

HostClock ClockOf(const v1::TraceManifest& manifest, const std::string& path) {
  const v1::ClockOffset& recorded = manifest.clock();
  HostClock clock;
  clock.host = manifest.host();
  clock.manifest = path;
  clock.receipt_offset_ns = TimeUtil::DurationToNanoseconds(recorded.offset());
  clock.offset_ns = clock.receipt_offset_ns;
  const int64_t round_trip = TimeUtil::DurationToNanoseconds(recorded.round_trip());
  if (recorded.has_round_trip() && recorded.has_midpoint_offset() && round_trip > 0 &&
      round_trip <= kMaxRoundTripNs) {
    clock.round_trip_ns = round_trip;
    clock.offset_ns = TimeUtil::DurationToNanoseconds(recorded.midpoint_offset());
  }
  return clock;
}

}  // namespace

std::string ClockLabel(const std::optional<HostClock>& clock) {
  if (!clock.has_value()) return "own clock (no manifest clock offset)";
  if (!clock->measured()) {
    return absl::StrFormat("clock offset %.3f ms (%s)", Ms(clock->offset_ns), clock->manifest);
  }
  return absl::StrFormat("clock offset %.3f ms +/-%.3f ms (%s)", Ms(clock->offset_ns),
                         Ms(clock->bound_ns()), clock->manifest);
}

std::string AlignmentBound(const HostClock& clock) {
  if (!clock.measured()) {
    return "early by at most the trace request's one-way transit to this host";
  }
  return absl::StrFormat(
      "within +/-%.3f ms (half the measured round trip of %.3f ms) plus the clocks' drift "
      "since the trace request",
      Ms(clock.bound_ns()), Ms(*clock.round_trip_ns));
}

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
    const HostClock clock = ClockOf(manifest, file.path);
    for (const v1::ProcessResult& result : manifest.results()) {
      if (!result.file().empty()) clocks.by_file.emplace(result.file(), clock);
    }
    if (!manifest.host().empty()) clocks.by_host.emplace(manifest.host(), clock);
  }
}

}  // namespace gpuctl::merge
