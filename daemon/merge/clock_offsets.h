#ifndef GPUCTL_DAEMON_MERGE_CLOCK_OFFSETS_H_
#define GPUCTL_DAEMON_MERGE_CLOCK_OFFSETS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpuctl::merge {

// One host's clock against the caller's, from its manifest's `clock`
// (TraceManifest.clock, docs/trace-format.md). Its receipt offset (the
// daemon's clock at receipt of the trace request minus the caller's clock
// at sending) holds the clocks' true offset plus the request's one-way
// transit, so a time moved onto the caller's clock with it is early by
// that transit. A caller that timed clock probes before the request
// (ClockOffset.round_trip) also gave the midpoint offset, right within
// half the probe's round trip, which is then used instead.
struct HostClock {
  std::string host;      // the manifest's host
  std::string manifest;  // the manifest's path
  // What the host's times are moved by: the midpoint offset when measured,
  // else the receipt offset.
  int64_t offset_ns = 0;
  int64_t receipt_offset_ns = 0;
  // The probe's round trip when measured: offset_ns is within half of it
  // of the true offset at the request, plus the clocks' drift since.
  std::optional<int64_t> round_trip_ns;

  bool measured() const { return round_trip_ns.has_value(); }
  // Half the round trip; measured() only.
  int64_t bound_ns() const { return round_trip_ns.value_or(0) / 2 + round_trip_ns.value_or(0) % 2; }
};

// The clocks the manifests of a set of trace directories record.
struct ManifestClocks {
  // By process file name (ProcessResult.file) and by host, of the manifests
  // that carry a clock; the first manifest wins when two name one file.
  std::map<std::string, HostClock> by_file;
  std::map<std::string, HostClock> by_host;
  // Manifests that could not be read or parsed, and manifests without a
  // clock (a request that carried no caller time), in words.
  std::vector<std::string> warnings;
};

// The host's clock for a rank's labels, in words: "clock offset 1.234 ms
// +/-0.150 ms (<manifest>)" when measured, "clock offset 1.234 ms
// (<manifest>)" when not, else its own clock.
std::string ClockLabel(const std::optional<HostClock>& clock);

// How far a rank's times moved with `clock` may be from the caller's
// clock, in words: "within +/-0.150 ms (half the measured round trip) plus
// the clocks' drift since the trace request", or, unmeasured, "early by at
// most the trace request's one-way transit to this host".
std::string AlignmentBound(const HostClock& clock);

// Reads `dir`/_gpuctl/*.json and an old layout's `dir`/manifest.json into
// `clocks`. A directory without manifests adds nothing; an unreadable or
// malformed manifest adds a warning, never an error: its ranks are merged
// on their own clocks.
void ReadManifestClocks(const std::string& dir, ManifestClocks& clocks);

}  // namespace gpuctl::merge

#endif  // GPUCTL_DAEMON_MERGE_CLOCK_OFFSETS_H_
