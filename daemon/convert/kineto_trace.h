#ifndef GPUCTL_DAEMON_CONVERT_KINETO_TRACE_H_
#define GPUCTL_DAEMON_CONVERT_KINETO_TRACE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuctl::daemon {

// Who a kineto trace file belongs to, as gpuctld knows it.
struct KinetoTraceTag {
  std::string trace_id, host;
  int32_t rank = -1;  // -1: unknown
  int32_t pid = 0;    // in the daemon's pid namespace
  std::string job_id;
};

// How PyTorch names the range of each optimizer.step() call
// ("Optimizer.step#SGD.step"), `cat` "user_annotation".
inline constexpr char kOptimizerStepPrefix[] = "Optimizer.step#";

struct KinetoTraceSummary {
  uint64_t event_count = 0, cpu_op_count = 0, kernel_count = 0;
  // PyTorch's optimizer.step() ranges (kOptimizerStepPrefix): the
  // iterations kineto recorded, as it counts them.
  uint64_t optimizer_steps = 0;
  // The earliest start and the latest end of the non-metadata events, in
  // Unix ns (kineto's µs `ts`/`dur` plus `baseTimeNanoseconds`); 0 when the
  // trace has no such event.
  int64_t first_ts_unix_ns = 0, last_ts_unix_ns = 0;
  // The window kineto really recorded: its profiler spans (`cat` "Trace",
  // "PyTorch Profiler (N)", one per iteration or one for a time window),
  // earliest start to latest end; 0 when the file has none.
  int64_t window_start_unix_ns = 0, window_end_unix_ns = 0;
  std::string trace_id_in_file;  // kineto's REQUEST_TRACE_ID echo, if any
};

struct KinetoConverted {
  std::string gzip;
  KinetoTraceSummary summary;
};

// Bounds on what ConvertKinetoTrace accepts.
inline constexpr size_t kMaxKinetoTraceBytes = size_t{2} << 30;
inline constexpr int kMaxKinetoTraceDepth = 32;

// Validates `json` as a trace file written by libkineto (an object with one
// `traceEvents` array of event objects, each with a one-letter `ph` and a
// numeric `ts` unless it is metadata, `ph` "M"), parsing it as a stream (no
// document is built), and returns it re-emitted compactly (one event per
// line) and gzip-compressed at `gzip_level` (0-9), tagged with:
//   - a first top-level member `"gpuctl": {"trace_id", "host", "rank", "pid",
//     "job_id"}` (rank left out when unknown); a `gpuctl` member already in
//     the file is dropped, so the tag cannot be forged by the process;
//   - a last member `"distributedInfo": {"rank": R}` when the file has none
//     and the rank is known.
// Both write `"rank": R` with a space after the colon, the form Holistic
// Trace Analysis looks for; its line-by-line search finds gpuctl's first.
// Everything else is kept: key order, strings, numbers as written.
//
// Returns INVALID_ARGUMENT naming the byte offset for malformed JSON, a
// file that is not a kineto trace, nesting deeper than
// kMaxKinetoTraceDepth or input over kMaxKinetoTraceBytes. Never crashes,
// whatever the input. Thread-compatible; no shared state.
absl::StatusOr<KinetoConverted> ConvertKinetoTrace(absl::string_view json,
                                                   const KinetoTraceTag& tag, int gzip_level);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CONVERT_KINETO_TRACE_H_
