#ifndef GPUCTL_DAEMON_S3_ORPHANED_UPLOADS_H_
#define GPUCTL_DAEMON_S3_ORPHANED_UPLOADS_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "daemon/s3/s3_client.h"

namespace gpuctl::s3 {

// Multipart uploads left open by an earlier run of this host's daemon: one
// killed mid-upload, or one whose AbortMultipartUpload failed too. Their
// parts stay stored (and billed) until aborted.
//
// An upload counts as this host's when its key is one of this host's trace
// data files (<prefix>/<yyyy>/<mm>/<dd>/<trace-id>/<host>-rank<r>-pid<p>.json.gz,
// as trace_object_key.h and daemon/store/trace_file_name.h name them); only data
// files are large enough to go up in parts, and manifests (either layout's:
// .../manifest.json, .../_gpuctl/<host>.json) are never counted. Other
// hosts' uploads are never touched: their daemons may be uploading them
// right now.

// How long before this daemon's start an upload must have been initiated to
// count as orphaned. A daemon that restarts while another one of the same
// host name (the old one still shutting down, or a second host sharing the
// name) uploads must not abort that live upload; a trace file goes up in
// minutes, so an hour leaves a wide berth.
inline constexpr absl::Duration kOrphanedUploadMargin = absl::Hours(1);

// True when `key` is a trace data file of `host` under `prefix` (the
// bucket's key prefix, S3Config::prefix). `host` is the raw host name; it is
// cleaned as trace file names clean it.
bool IsHostTraceFileKey(absl::string_view prefix, absl::string_view host, absl::string_view key);

struct OrphanedUploadsReport {
  size_t listed = 0;   // uploads under the prefix, any host's
  size_t aborted = 0;  // this host's orphans aborted
  size_t failed = 0;   // this host's orphans whose abort failed
  // Why the listing ended early (a list error, or CANCELLED when stopped).
  absl::Status status;
};

// Lists the uploads under the client's prefix, page by page, and aborts
// those of `host` initiated before `cutoff`, logging each abort. Failures
// are logged as warnings and counted, never fatal. `stopped` is polled
// before each request: once it returns true the sweep ends.
OrphanedUploadsReport AbortOrphanedUploads(S3Client& client, absl::string_view host,
                                           absl::Time cutoff, absl::FunctionRef<bool()> stopped);

// Runs AbortOrphanedUploads once on its own thread, so the daemon's start
// and serving never wait for the bucket. Shared by its owner and its thread:
// the thread keeps it (and the client) alive when Stop leaves it running.
// Thread-safe.
class OrphanedUploadSweep {
 public:
  using Done = std::function<void(const OrphanedUploadsReport&)>;

  // Starts the sweep; `done` (may be empty) runs on its thread at the end.
  static std::shared_ptr<OrphanedUploadSweep> Start(std::shared_ptr<S3Client> client,
                                                    std::string host, absl::Time cutoff, Done done);
  ~OrphanedUploadSweep();
  OrphanedUploadSweep(const OrphanedUploadSweep&) = delete;
  OrphanedUploadSweep& operator=(const OrphanedUploadSweep&) = delete;

  // Ends the sweep before its next request: waits up to `grace` for the
  // request in flight, then leaves it to finish on its own. Idempotent.
  void Stop(absl::Duration grace);

 private:
  OrphanedUploadSweep(std::shared_ptr<S3Client> client, std::string host, absl::Time cutoff,
                      Done done);
  void Run();

  const std::shared_ptr<S3Client> client_;
  const std::string host_;
  const absl::Time cutoff_;
  const Done done_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  absl::Notification exited_;
};

}  // namespace gpuctl::s3

#endif  // GPUCTL_DAEMON_S3_ORPHANED_UPLOADS_H_
