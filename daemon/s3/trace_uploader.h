#ifndef GPUCTL_DAEMON_S3_TRACE_UPLOADER_H_
#define GPUCTL_DAEMON_S3_TRACE_UPLOADER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "daemon/common/clock.h"
#include "daemon/common/deadline_wait.h"
#include "daemon/common/task_runner.h"
#include "daemon/s3/orphaned_uploads.h"
#include "daemon/s3/s3_client.h"
#include "daemon/s3/s3_store_options.h"
#include "daemon/store/local_store.h"

namespace gpuctl::s3 {

// What the uploader takes from its surroundings; parts left empty get the
// real thing.
struct TraceUploaderDeps {
  // Stamps uploaded_at and times the retries. Real when null. Not owned;
  // must outlive the uploader.
  Clock* clock = nullptr;
  // Where the wake-ups for retries come due (deadline_wait.h), against
  // `clock`. Null: the uploader thread times its own waits. Not owned; must
  // outlive the uploader and every timer it armed.
  TaskRunner* timers = nullptr;
  // A uniformly random duration in [0, bound]: the retry delay's jitter.
  std::function<absl::Duration(absl::Duration bound)> jitter;
  // Called on the uploader thread after each attempt, with its outcome, once
  // the queue reflects it.
  std::function<void(absl::string_view trace_id, const absl::Status& status)> on_attempt;
  // Called once the store's start-up sweep of orphaned multipart uploads
  // has ended, on the sweep's thread.
  std::function<void(const OrphanedUploadsReport& report)> on_orphan_sweep;
};

// What a flush at shutdown did (TraceUploader::Flush).
struct FlushReport {
  // Traces uploaded since the flush began.
  size_t uploaded = 0;
  // Traces still queued when it ended, by id; they stay marked in the spool,
  // so the next start with this spool uploads them.
  std::vector<std::string> left;
};

// Copies completed traces from the local spool to the bucket, on its own
// thread, one trace at a time:
//
//   pin; PutObjectFromFile each data file; put the final manifest (state
//   UPLOADED) to the bucket LAST, as this host's manifest
//   <trace prefix>/_gpuctl/<host>.json (host: TraceFileHost(hostname)), then
//   locally; clear the awaiting-upload mark; unless keep_local, remove the
//   local data files (not the manifest).
//
// Several hosts of one trace (a fan-out) upload under one trace prefix: the
// data files carry their host's name and each host has its own manifest
// key, so none overwrites another's.
//
// A failed attempt records its error and attempt count in the local
// manifest (still UPLOAD_PENDING) and is retried after
// min(upload_retry_max, upload_retry_initial * 2^(n-1)) (half of it
// jittered); authentication errors wait upload_retry_max at once. It never
// gives up: the awaiting-upload mark keeps the trace queued across restarts.
//
// At shutdown BeginFlush makes every queued trace due at once, its backoff
// forgotten (a failure from then on waits from upload_retry_initial again),
// and Flush waits for the queue to empty or a deadline to pass on the
// injected clock; Stop follows.
//
// Shared by the store and its thread: the thread keeps it (and the spool
// and client) alive when Stop abandons an upload in flight. Thread-safe.
class TraceUploader {
 public:
  TraceUploader(std::shared_ptr<daemon::LocalTraceStore> spool, std::shared_ptr<S3Client> client,
                S3StoreOptions options, TraceUploaderDeps deps);
  ~TraceUploader();
  TraceUploader(const TraceUploader&) = delete;
  TraceUploader& operator=(const TraceUploader&) = delete;

  // Starts the thread, which holds `self` until it ends.
  static void Start(const std::shared_ptr<TraceUploader>& self);
  // Queues a trace for an attempt now. The notification is set once that
  // attempt has ended (or at Stop); already set after Stop.
  std::shared_ptr<absl::Notification> Enqueue(absl::string_view trace_id);
  // Every trace queued, and every one queued from now on, is due at once,
  // its backoff restarted; every notification Enqueue returned, or will
  // return, is set, so no caller waits on an upload. The flush ends `wait`
  // from the first call, on the injected clock. Idempotent.
  void BeginFlush(absl::Duration wait);
  // BeginFlush(0) unless begun, then waits until nothing is queued, Stop is
  // called, or the flush's end passes (with deps.timers, a timer there
  // marks it). Not on the uploader's thread.
  FlushReport Flush();
  // Ends the thread: waits up to `grace` for an attempt in flight, then
  // leaves it to finish on its own. Traces not uploaded stay marked.
  // Idempotent.
  void Stop(absl::Duration grace);

  // "s3://<bucket>/<prefix>/<yyyy>/<mm>/<dd>/<trace-id>/".
  std::string RemoteLocation(absl::string_view trace_id) const;
  // "s3://<bucket>/<prefix>".
  std::string RemoteRoot() const;
  const std::string& endpoint() const { return client_->config().endpoint; }
  size_t pending() const;
  // When the trace waiting longest was queued (by this run);
  // InfiniteFuture when none waits.
  absl::Time oldest_pending_since() const;
  // Bytes of the traces this run uploaded (data files and the manifest as
  // sent), counted once a trace's upload completes.
  uint64_t uploaded_bytes() const { return uploaded_bytes_.load(); }

 private:
  struct Pending {
    absl::Time due = absl::InfinitePast();
    absl::Time queued_at = absl::InfiniteFuture();
    // Failures since this run queued it: the backoff's exponent.
    int failures = 0;
    bool in_flight = false;
    std::vector<std::shared_ptr<absl::Notification>> waiters;
  };

  void Run();
  // The next trace due, marked in flight; false to stop.
  bool TakeNext(std::string* trace_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes the waiters; drops the trace when uploaded or `gone`, else
  // schedules the next attempt.
  void Finish(const std::string& trace_id, const absl::Status& status, bool gone)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One attempt; `attempt` counts every attempt of the trace, earlier runs'
  // included (0 when the manifest could not be read). `gone`: the trace is
  // no longer awaiting upload (deleted, or done meanwhile).
  absl::Status Upload(const std::string& trace_id, uint32_t* attempt, bool* gone);
  absl::Status UploadFiles(const daemon::StoredTrace& trace);
  void RecordFailure(const std::string& trace_id, uint32_t attempt, const absl::Status& error);
  absl::Duration RetryDelay(int failures, const absl::Status& error);

  const std::shared_ptr<daemon::LocalTraceStore> spool_;
  const std::shared_ptr<S3Client> client_;
  const S3StoreOptions options_;
  // This host's manifest in the bucket: "_gpuctl/<host>.json".
  const std::string manifest_name_;
  const TraceUploaderDeps deps_;
  RealClock real_clock_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  DeadlineWaiter waiter_;
  absl::btree_map<std::string, Pending> pending_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> uploaded_bytes_{0};
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool flushing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time flush_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Traces uploaded since BeginFlush.
  size_t flushed_ ABSL_GUARDED_BY(mu_) = 0;
  // Signalled when the queue empties and at Stop; what Flush waits on.
  absl::CondVar drained_;
  DeadlineWaiter flush_waiter_;
  std::thread thread_;
  absl::Notification exited_;
};

}  // namespace gpuctl::s3

#endif  // GPUCTL_DAEMON_S3_TRACE_UPLOADER_H_
