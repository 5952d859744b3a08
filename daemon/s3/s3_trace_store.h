#ifndef GPUCTL_DAEMON_S3_S3_TRACE_STORE_H_
#define GPUCTL_DAEMON_S3_S3_TRACE_STORE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "daemon/common/clock.h"
#include "daemon/s3/orphaned_uploads.h"
#include "daemon/s3/s3_client.h"
#include "daemon/s3/s3_store_options.h"
#include "daemon/s3/trace_uploader.h"
#include "daemon/store/local_store.h"
#include "daemon/store/trace_store.h"

namespace gpuctl::s3 {

// A TraceStore whose traces end up in an S3 bucket, under
// <prefix>/<yyyy>/<mm>/<dd>/<trace-id>/ (trace_object_key.h), spooled in a
// LocalTraceStore until uploaded.
//
// Files are written to the spool. PutManifest marks the trace awaiting
// upload (durably) before writing its manifest (state UPLOAD_PENDING), hands
// it to the uploader thread (trace_uploader.h) and waits up to
// upload_wait for the first attempt, so a completed trace usually reports
// itself uploaded. At creation every trace still marked is queued again:
// a restart loses nothing; at shutdown the queue is flushed for up to
// shutdown_wait (BeginShutdown, Shutdown). Meanwhile a background thread
// aborts the multipart uploads an earlier run of this host left open
// (orphaned_uploads.h); neither creation nor serving waits for it.
//
// Manifests are read from the spool, which keeps them after the upload
// (listing stays a local index that survives restarts; a listing with
// `bucket` set lists the bucket instead, remote_listing.h); of a trace the
// spool does not know, GetManifest reads one host's manifest from the
// bucket (remote_trace.h: this host's when there, else the first listed)
// and Open serves that trace's files from the bucket: a trace outlives the
// spool, and the pod, that uploaded it. Open serves
// a file from the spool while it is there, else from the bucket, in ranged
// reads. In the bucket each host's manifest has its own key,
// <trace prefix>/_gpuctl/<host>.json; one written by the legacy layout,
// <trace prefix>/manifest.json, is read when this host's is absent (and
// the other way round, when asked by the legacy name). Retention applies to the spool and never
// deletes a trace awaiting upload.
//
// Thread-safe; every method may block on I/O (call off the event loop).
class S3TraceStore final : public daemon::TraceStore {
 public:
  // Queues the spool's traces awaiting upload, starts the uploader and the
  // sweep of orphaned uploads.
  static std::unique_ptr<S3TraceStore> Create(std::unique_ptr<daemon::LocalTraceStore> spool,
                                              std::unique_ptr<S3Client> client,
                                              S3StoreOptions options, TraceUploaderDeps deps = {});
  // Stops without flushing if Shutdown() was not called.
  ~S3TraceStore() override;
  S3TraceStore(const S3TraceStore&) = delete;
  S3TraceStore& operator=(const S3TraceStore&) = delete;

  // Shutdown begins: shutdown_wait counts from here, every pending upload
  // is due at once (TraceUploader::BeginFlush) and PutManifest no longer
  // waits for an upload; traces completed from now on join the flush.
  // Idempotent.
  void BeginShutdown();
  // BeginShutdown if it was not called; uploads what is queued until the
  // queue is empty or shutdown_wait has passed since BeginShutdown, logs
  // what went up and what stays marked in the spool for the next start,
  // then stops the sweep and the uploader (an upload in flight at the
  // deadline gets a couple of seconds more, then is left). PutManifest
  // calls from then on leave their traces marked. Returns what the flush
  // did; empty when called again.
  FlushReport Shutdown();

  // The s3:// URL of an uploaded trace, else its spool directory. For an
  // empty id, the store: "s3://bucket/prefix (spooled in /var/lib/...)".
  std::string Location(absl::string_view trace_id) const override;
  std::string ManifestName() const override { return spool_->ManifestName(); }
  // Of a trace the spool does not know: its host's "_gpuctl/<host>.json".
  std::string ServedManifestName(const v1::TraceManifest& manifest) const override;
  absl::Status PutFile(absl::string_view trace_id, absl::string_view name,
                       absl::string_view data) override;
  absl::Status PutManifest(const v1::TraceManifest& manifest) override;
  absl::StatusOr<v1::TraceManifest> GetManifest(absl::string_view trace_id) override;
  absl::StatusOr<v1::ListTracesResponse> List(const v1::ListTracesRequest& request) override;
  absl::StatusOr<std::unique_ptr<daemon::TraceFileReader>> Open(absl::string_view trace_id,
                                                                absl::string_view name) override;
  // Every host's manifest of the trace in the bucket (ReadRemoteManifests).
  absl::StatusOr<std::vector<std::pair<std::string, v1::TraceManifest>>> GetBucketManifests(
      absl::string_view trace_id) override;
  absl::StatusOr<std::unique_ptr<daemon::TraceFileReader>> OpenInBucket(
      absl::string_view trace_id, absl::string_view name) override;
  absl::StatusOr<daemon::TracePin> Pin(absl::string_view trace_id) override;
  absl::Status SetAwaitingUpload(absl::string_view trace_id, bool awaiting) override;
  size_t EnforceRetention() override;

  daemon::LocalTraceStore& spool() const { return *spool_; }
  // Traces queued for upload, in flight included.
  size_t pending_uploads() const { return uploader_->pending(); }
  absl::Time oldest_pending_upload_since() const { return uploader_->oldest_pending_since(); }
  uint64_t uploaded_bytes() const { return uploader_->uploaded_bytes(); }

 private:
  // A trace id the spool does not know at all: its files, if any, are in
  // the bucket only.
  bool OnlyInBucket(absl::string_view trace_id) const;
  // `name` of the trace from the bucket, in ranged reads.
  absl::StatusOr<std::unique_ptr<daemon::TraceFileReader>> OpenRemote(absl::string_view trace_id,
                                                                      absl::string_view name,
                                                                      bool only_in_bucket);

  S3TraceStore(std::shared_ptr<daemon::LocalTraceStore> spool, std::shared_ptr<S3Client> client,
               S3StoreOptions options, std::shared_ptr<TraceUploader> uploader,
               std::shared_ptr<OrphanedUploadSweep> sweep, Clock* clock);

  RealClock real_clock_;
  // Today, for listings of the bucket (TraceUploaderDeps::clock, else real).
  Clock* const clock_;
  const std::shared_ptr<daemon::LocalTraceStore> spool_;
  const std::shared_ptr<S3Client> client_;
  const S3StoreOptions options_;
  // This host's manifest, as the bucket names it: "_gpuctl/<host>.json".
  const std::string manifest_name_;
  const std::shared_ptr<TraceUploader> uploader_;
  const std::shared_ptr<OrphanedUploadSweep> sweep_;
  absl::Mutex mu_;
  bool flush_begun_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gpuctl::s3

#endif  // GPUCTL_DAEMON_S3_S3_TRACE_STORE_H_
