#ifndef GPUCTL_DAEMON_CORE_CAPTURE_PROCESSOR_H_
#define GPUCTL_DAEMON_CORE_CAPTURE_PROCESSOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/convert/gzip.h"
#include "daemon/core/host_context.h"
#include "daemon/core/peer_channel.h"
#include "daemon/store/trace_store.h"
#include "gpuctl/v1/manifest.pb.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon {

struct CaptureJob {
  std::string trace_id;
  std::string host;
  std::string file_name;
  v1::ProcessInfo process;  // the daemon's view: process.pid is the host's
  // The pid in the process's own namespace, which its payload carries.
  int32_t own_pid = 0;
  int32_t analysis_rank = -1;  // ChromeTraceMeta::analysis_rank
  std::unique_ptr<Payload> payload;
  absl::Duration timestamp_slack = absl::Seconds(5);
  // What the process's CaptureResult said, used when the payload has no
  // kCaptureInfo record (which is authoritative when present).
  bool reported_host_only = false;
  uint64_t reported_cupti_dropped = 0;
  int gzip_level = kDefaultGzipLevel;
  // Host context recorded for the process (activities cpu / sched): its
  // summary goes into the result, its events into the file (a prepared
  // kineto trace's too, at the end of its traceEvents), cut to the window.
  std::optional<v1::HostContextResult> host_context;
  std::shared_ptr<const HostContextEvents> host_context_events;
  // The window asked for, for a prepared trace's host context (a records
  // payload carries its own).
  int64_t window_start_ns = 0;
  int64_t window_end_ns = 0;
};

// The blocking part of a result: validate the records, convert them to
// Chrome trace JSON, gzip and store. Runs on a worker thread. Returns a
// ProcessResult with status OK (and the counts, sizes, file name, CUPTI
// drops and host-only flag; a host-only trace's reason is the message),
// REJECTED (invalid records, with the reader's message) or FAILED
// (conversion or storage error). Identity fields (pid, rank, host, job) are
// left for the caller.
v1::ProcessResult ProcessCapture(CaptureJob job, TraceStore* store);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_CAPTURE_PROCESSOR_H_
