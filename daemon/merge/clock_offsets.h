#ifndef GPUCTL_DAEMON_MERGE_CLOCK_OFFSETS_H_
#define GPUCTL_DAEMON_MERGE_CLOCK_OFFSETS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpuctl::merge {

// One host's clock against the caller's, from its manifest's `clock`
// (TraceManifest.clock, docs/trace-format.md): the daemon's clock at
// receipt of the trace request minus the caller's clock at sending. It
// holds the clocks' true offset plus the request's one-way transit, so a
// time moved onto the caller's clock with it is early by that transit.
struct HostClock {
  std::string host;      // the manifest's host
  std::string manifest;  // the manifest's path
  int64_t offset_ns = 0;
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

// Reads `dir`/_gpuctl/*.json and an old layout's `dir`/manifest.json into
// `clocks`. A directory without manifests adds nothing; an unreadable or
// malformed manifest adds a warning, never an error: its ranks are merged
// on their own clocks.
void ReadManifestClocks(const std::string& dir, ManifestClocks& clocks);

}  // namespace gpuctl::merge

#endif  // GPUCTL_DAEMON_MERGE_CLOCK_OFFSETS_H_
