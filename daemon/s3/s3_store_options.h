#ifndef GPUCTL_DAEMON_S3_S3_STORE_OPTIONS_H_
#define GPUCTL_DAEMON_S3_S3_STORE_OPTIONS_H_

#include <string>

#include "absl/time/time.h"

namespace gpuctl::s3 {

// How the S3 trace store (s3_trace_store.h) moves traces from its local
// spool to the bucket; the store.s3 keys upload_wait, keep_local,
// upload_retry_max and shutdown_wait.
struct S3StoreOptions {
  // How long completing a trace waits for its first upload attempt, so that
  // the trace usually reports itself uploaded. Zero: do not wait.
  absl::Duration upload_wait = absl::Seconds(30);
  // Keep the local data files after the upload (the local manifest is kept
  // either way).
  bool keep_local = false;
  // Failed uploads are retried with exponential backoff and jitter from
  // upload_retry_initial up to this interval, forever.
  absl::Duration upload_retry_max = absl::Minutes(5);
  absl::Duration upload_retry_initial = absl::Seconds(1);
  // How long shutdown keeps uploading what is queued, every trace due at
  // once, before it leaves the rest marked in the spool for the next start.
  // Zero: leave them at once.
  absl::Duration shutdown_wait = absl::Seconds(30);
  // The daemon's host name, as its trace file names carry it: at start the
  // store aborts this host's orphaned multipart uploads (orphaned_uploads.h).
  // The daemon sets it (DaemonOptions::host_name, resolved at start).
  std::string hostname;
};

}  // namespace gpuctl::s3

#endif  // GPUCTL_DAEMON_S3_S3_STORE_OPTIONS_H_
