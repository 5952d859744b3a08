#ifndef GPUCTL_DAEMON_MERGE_TRACE_MANIFESTS_H_
#define GPUCTL_DAEMON_MERGE_TRACE_MANIFESTS_H_

#include <string>
#include <vector>

#include "gpuctl/v1/manifest.pb.h"

namespace gpuctl::merge {

// A manifest of a trace directory, as parsed.
struct TraceManifestFile {
  std::string path;
  v1::TraceManifest manifest;
};

// The manifests of one trace directory (docs/trace-format.md).
struct TraceManifests {
  std::vector<TraceManifestFile> manifests;  // by path
  // Manifests that could not be read or parsed, in words ("PATH: ...").
  std::vector<std::string> unreadable;
};

// Reads `dir`/_gpuctl/*.json and an old layout's `dir`/manifest.json (in
// protobuf's JSON mapping; fields a newer daemon added are ignored). A
// directory without manifests gives none; a manifest that cannot be read,
// is larger than 64 MiB or does not parse is listed in `unreadable`, never
// an error: readers go on without it.
TraceManifests ReadTraceManifests(const std::string& dir);

}  // namespace gpuctl::merge

#endif  // GPUCTL_DAEMON_MERGE_TRACE_MANIFESTS_H_
