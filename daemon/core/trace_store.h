#ifndef GPUCTL_DAEMON_CORE_TRACE_STORE_H_
#define GPUCTL_DAEMON_CORE_TRACE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpuctl/v1/manifest.pb.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon {

inline constexpr absl::string_view kManifestFileName = "manifest.json";

// Reads one stored file sequentially.
class TraceFileReader {
 public:
  virtual ~TraceFileReader() = default;
  virtual uint64_t size() const = 0;
  // Reads up to `max_bytes` into `out` (replacing its contents); an empty
  // result means end of file.
  virtual absl::Status Read(size_t max_bytes, std::string* out) = 0;
};

// Where traces live. Every method is thread-safe. A file becomes visible
// only once completely written (no half files after a crash).
class TraceStore {
 public:
  virtual ~TraceStore() = default;
  // Human-readable location of a trace ("/var/lib/gpuctl/traces/<id>").
  virtual std::string Location(absl::string_view trace_id) const = 0;
  virtual absl::Status PutFile(absl::string_view trace_id, absl::string_view name,
                               absl::string_view data) = 0;
  // Writes (or replaces) the trace's manifest.json.
  virtual absl::Status PutManifest(const v1::TraceManifest& manifest) = 0;
  virtual absl::StatusOr<v1::TraceManifest> GetManifest(absl::string_view trace_id) = 0;
  // Newest first. Page tokens are opaque to callers.
  virtual absl::StatusOr<v1::ListTracesResponse> List(const v1::ListTracesRequest& request) = 0;
  virtual absl::StatusOr<std::unique_ptr<TraceFileReader>> Open(absl::string_view trace_id,
                                                                absl::string_view name) = 0;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_TRACE_STORE_H_
