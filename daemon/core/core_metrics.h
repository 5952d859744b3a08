#ifndef GPUCTL_DAEMON_CORE_CORE_METRICS_H_
#define GPUCTL_DAEMON_CORE_CORE_METRICS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gpuctl/v1/manifest.pb.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon {

// How a trace came to be.
enum class TraceTrigger {
  kOnDemand,   // a Trace call
  kScheduled,  // the daemon's schedule
};

// How a trace ended.
enum class TraceOutcome {
  kCompleted,  // every process has a result and the manifest is stored
  kCancelled,  // cancelled before every process delivered
  kFailed,     // the manifest could not be stored
  kRefused,    // StartTrace refused it (bad request, nothing selected...)
};

// What the core reports as it happens, for the daemon's own metrics
// (daemon/metrics). Every call comes from the event-loop thread and must
// return at once (count, observe, nothing that blocks). With no
// CoreMetrics in DaemonCore::Deps the core reports nothing.
class CoreMetrics {
 public:
  virtual ~CoreMetrics() = default;
  // A process completed its Hello and is attached.
  virtual void OnHelloAccepted() = 0;
  // A Hello was refused with `status` (its code says why: see
  // daemon/ipc's RejectReasonFor), by the core or by the IPC server.
  virtual void OnHelloRefused(const absl::Status& status) = 0;
  // StartTrace accepted a trace.
  virtual void OnTraceStarted(TraceTrigger trigger) = 0;
  // A trace ended, or was refused (then it never started).
  virtual void OnTraceDone(TraceTrigger trigger, TraceOutcome outcome) = 0;
  // A process opened its window: `trigger_latency` from the request's
  // arrival at the daemon, `start_skew` after the start instant (zero when
  // it opened at or before it; not reported for iteration windows).
  virtual void OnWindowOpened(absl::Duration trigger_latency,
                              std::optional<absl::Duration> start_skew) = 0;
  // A process's final result. `conversion` is how long its payload took
  // from admission to the stored file (validation, conversion, gzip,
  // write); nullopt when nothing was converted.
  virtual void OnProcessResult(const v1::ProcessResult& result,
                               std::optional<absl::Duration> conversion) = 0;
};

// The core's state at one instant, for gauges (DaemonCore::Snapshot).
struct CoreSnapshot {
  struct AttachedGroup {
    v1::ProcessRole role = v1::PROCESS_ROLE_UNSPECIFIED;
    // How the process is attached: "library" (libgpuctl) or "kineto"
    // (libkineto's daemon protocol).
    std::string kind;
    uint64_t count = 0;
  };
  std::vector<AttachedGroup> attached;
  uint64_t active_traces = 0;
  // Processes asked to capture whose result has not arrived yet.
  uint64_t captures_in_flight = 0;
  // Trace data being validated and converted, and waiting for room under
  // trace.max_ingest_bytes (results and bytes).
  uint64_t ingest_running_bytes = 0;
  uint64_t ingest_waiting_bytes = 0;
  uint64_t ingest_waiting_results = 0;
  uint64_t ingest_max_bytes = 0;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_CORE_METRICS_H_
