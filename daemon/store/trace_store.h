#ifndef GPUCTL_DAEMON_STORE_TRACE_STORE_H_
#define GPUCTL_DAEMON_STORE_TRACE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpuctl/v1/manifest.pb.h"
#include "gpuctl/v1/service.pb.h"
#include "gpuctl/v1/trace_layout.h"

namespace gpuctl::daemon {

// How the store's index lists a trace's manifest, wherever it lies on disk
// (also the manifest's name in the layout before gpuctl/v1/trace_layout.h).
inline constexpr absl::string_view kManifestFileName = layout::kLegacyManifestName;

// Reads one stored file sequentially.
class TraceFileReader {
 public:
  virtual ~TraceFileReader() = default;
  virtual uint64_t size() const = 0;
  // Reads up to `max_bytes` into `out` (replacing its contents); an empty
  // result means end of file.
  virtual absl::Status Read(size_t max_bytes, std::string* out) = 0;
};

// Keeps one trace from being deleted by retention while it lives. Move-only;
// a default-constructed pin holds nothing. May outlive the store.
class TracePin {
 public:
  TracePin() = default;
  explicit TracePin(absl::AnyInvocable<void() &&> release) : release_(std::move(release)) {}
  TracePin(TracePin&& other) noexcept : release_(std::exchange(other.release_, nullptr)) {}
  TracePin& operator=(TracePin&& other) noexcept {
    if (this != &other) {
      Release();
      release_ = std::exchange(other.release_, nullptr);
    }
    return *this;
  }
  ~TracePin() { Release(); }

  // Lets the trace go now; idempotent.
  void Release() {
    absl::AnyInvocable<void()&&> release = std::exchange(release_, nullptr);
    if (release) std::move(release)();
  }

 private:
  absl::AnyInvocable<void() &&> release_;
};

// Where traces live. Every method is thread-safe and may block on I/O (call
// off the event loop). A file becomes visible only once completely written
// (no half files after a crash); a trace is complete, and listed, once its
// manifest is written, which is always after its files.
//
// Write errors name the path: RESOURCE_EXHAUSTED when the disk (or quota)
// is full, PERMISSION_DENIED when the store is not writable.
class TraceStore {
 public:
  virtual ~TraceStore() = default;
  // Human-readable location of a trace ("/var/lib/gpuctl/traces/<id>").
  virtual std::string Location(absl::string_view trace_id) const = 0;
  // The name a trace's manifest is served under ("_gpuctl/<host>.json",
  // gpuctl/v1/trace_layout.h): the first file GetTrace sends. Open accepts
  // it, and the old "manifest.json", for the trace's manifest.
  virtual std::string ManifestName() const = 0;
  // The name GetTrace serves `manifest` (as GetManifest returned it) under:
  // ManifestName(), unless the store read another host's manifest (a trace
  // found in a bucket only).
  virtual std::string ServedManifestName(const v1::TraceManifest& /*manifest*/) const {
    return ManifestName();
  }
  virtual absl::Status PutFile(absl::string_view trace_id, absl::string_view name,
                               absl::string_view data) = 0;
  // Writes (or replaces) the trace's manifest, completing the trace,
  // then applies the retention policy.
  virtual absl::Status PutManifest(const v1::TraceManifest& manifest) = 0;
  virtual absl::StatusOr<v1::TraceManifest> GetManifest(absl::string_view trace_id) = 0;
  // Complete traces, newest first. Page tokens are opaque to callers.
  virtual absl::StatusOr<v1::ListTracesResponse> List(const v1::ListTracesRequest& request) = 0;
  // The reader pins the trace (see Pin) until it is destroyed.
  virtual absl::StatusOr<std::unique_ptr<TraceFileReader>> Open(absl::string_view trace_id,
                                                                absl::string_view name) = 0;

  // Keeps `trace_id` from retention until the pin is released: for work
  // spanning several files (fetching, uploading). A trace not stored yet
  // may be pinned. NOT_FOUND while the trace is being deleted. Stores
  // without retention return an empty pin.
  virtual absl::StatusOr<TracePin> Pin(absl::string_view trace_id) {
    (void)trace_id;
    return TracePin();
  }

  // A trace as the store's bucket holds it (store.s3), every host's part:
  // each manifest with the trace file path it is served under
  // ("_gpuctl/<host>.json"), for GetTrace's `bucket`. FAILED_PRECONDITION
  // for a store without a bucket; NOT_FOUND when the bucket has no manifest
  // of the trace.
  virtual absl::StatusOr<std::vector<std::pair<std::string, v1::TraceManifest>>> GetBucketManifests(
      absl::string_view trace_id) {
    (void)trace_id;
    return absl::FailedPreconditionError(
        "this gpuctld stores traces locally only: it has no bucket (store.s3)");
  }
  // `name` of the trace read from the bucket, whether or not this store
  // holds a copy: one of the files GetBucketManifests lists, or one of the
  // manifest paths it names.
  virtual absl::StatusOr<std::unique_ptr<TraceFileReader>> OpenInBucket(absl::string_view trace_id,
                                                                        absl::string_view name) {
    (void)trace_id;
    (void)name;
    return absl::FailedPreconditionError(
        "this gpuctld stores traces locally only: it has no bucket (store.s3)");
  }

  // Marks whether a trace still has to be copied to a remote backend;
  // retention never deletes a marked trace. The mark is durable (it
  // survives a restart). Marking a trace not stored yet creates it, in
  // progress; clearing the mark of an unknown trace is NOT_FOUND. Stores
  // without retention accept and ignore it.
  virtual absl::Status SetAwaitingUpload(absl::string_view trace_id, bool awaiting) {
    (void)trace_id;
    (void)awaiting;
    return absl::OkStatus();
  }

  // Applies the retention policy now, oldest traces first, and returns how
  // many traces it deleted. The daemon calls it periodically (for max_age);
  // PutManifest calls it after each completed trace.
  virtual size_t EnforceRetention() { return 0; }
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_STORE_TRACE_STORE_H_
