// How a trace's files are laid out, wherever they are kept: a daemon's
// store directory (<root>/<trace-id>/), a bucket prefix
// (<prefix>/<yyyy>/<mm>/<dd>/<trace-id>/) and a download directory
// (gpuctl trace -o DIR, gpuctl get):
//
//   <host>-rank<r>-pid<p>.json.gz   one per process (daemon/store/trace_file_name.h);
//                                   the only *.json / *.gz at the top level
//   _gpuctl/<host>.json             one manifest per host (a TraceManifest, JSON)
//
// Tools that open every top-level JSON file of a directory as a rank's
// trace (Holistic Trace Analysis does) see the process traces only, and the
// hosts of a fan-out trace keep one manifest each, side by side. Stores and
// buckets written before this layout have one top-level "manifest.json";
// readers accept it, writers never write it.
//
// Plain functions on names, Abseil only: the daemon and the CLI both
// read them from here.
#ifndef GPUCTL_PROTO_GPUCTL_V1_TRACE_LAYOUT_H_
#define GPUCTL_PROTO_GPUCTL_V1_TRACE_LAYOUT_H_

#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gpuctl::layout {

// The directory of the per-host manifests, and the old top-level manifest.
inline constexpr absl::string_view kMetadataDir = "_gpuctl";
inline constexpr absl::string_view kLegacyManifestName = "manifest.json";
inline constexpr absl::string_view kManifestSuffix = ".json";
// Longest host part of a manifest name: a file name is at most 255 bytes.
inline constexpr size_t kMaxManifestHostBytes = 200;

// A name of [A-Za-z0-9._-]{1,255} without a leading dot: what every file of
// a trace is called inside its directory.
inline bool IsSafeFileName(absl::string_view name) {
  if (name.empty() || name.size() > 255 || name.front() == '.') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// True when `host` can name a manifest: a safe file name of at most
// kMaxManifestHostBytes bytes.
inline bool IsManifestHost(absl::string_view host) {
  return host.size() <= kMaxManifestHostBytes && IsSafeFileName(host);
}

// "_gpuctl/<host>.json"; `host` must pass IsManifestHost.
inline std::string ManifestPath(absl::string_view host) {
  return absl::StrCat(kMetadataDir, "/", host, kManifestSuffix);
}

// The <host> of "_gpuctl/<host>.json", or empty when `path` is not a
// manifest path of this layout.
inline absl::string_view ManifestPathHost(absl::string_view path) {
  if (path.size() <= kMetadataDir.size() + 1 + kManifestSuffix.size() ||
      path.substr(0, kMetadataDir.size()) != kMetadataDir || path[kMetadataDir.size()] != '/' ||
      path.substr(path.size() - kManifestSuffix.size()) != kManifestSuffix) {
    return {};
  }
  absl::string_view host = path.substr(kMetadataDir.size() + 1);
  host.remove_suffix(kManifestSuffix.size());
  return IsManifestHost(host) ? host : absl::string_view();
}

// A manifest of either layout: "_gpuctl/<host>.json" or "manifest.json".
inline bool IsManifestName(absl::string_view path) {
  return path == kLegacyManifestName || !ManifestPathHost(path).empty();
}

// What a trace's file may be called: a safe file name, or a manifest path.
inline bool IsTraceFilePath(absl::string_view path) {
  return IsSafeFileName(path) || !ManifestPathHost(path).empty();
}

}  // namespace gpuctl::layout

#endif  // GPUCTL_PROTO_GPUCTL_V1_TRACE_LAYOUT_H_
