#ifndef GPUCTL_DAEMON_CORE_HOST_CONTEXT_H_
#define GPUCTL_DAEMON_CORE_HOST_CONTEXT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gpuctl/v1/manifest.pb.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon {

// The activity names of TraceRequest.activities that ask for host context
// (docs/host-context.md) rather than GPU activity: CPU samples with call
// chains, and context switches as off-CPU slices. They never reach the
// traced processes.
inline constexpr char kHostActivityCpu[] = "cpu";
inline constexpr char kHostActivitySched[] = "sched";

// What of the host context a request asks for.
struct HostContextWanted {
  bool samples = false;   // "cpu"
  bool switches = false;  // "sched"
  bool dwarf = false;     // samples unwound with DWARF too (TraceRequest.host_unwind)
  // The trace's other processes, each recorded on its own: a recording
  // leaves them (and their descendants) out of its descendants, so a
  // selected process that descends from another is recorded once.
  std::vector<int32_t> recorded_apart;
  bool any() const { return samples || switches; }
};
HostContextWanted HostContextOf(const v1::TraceRequest& request);
bool IsHostActivity(absl::string_view name);
// The request's activities that go to the processes (GPU ones).
std::vector<std::string> GpuActivitiesOf(const v1::TraceRequest& request);

// One process's host context, recorded and symbolized: its events, ready
// to join the process's trace file. Immutable; any thread.
class HostContextEvents {
 public:
  virtual ~HostContextEvents() = default;
  // Hands `sink` each event of [window_start_ns, window_end_ns]
  // (CLOCK_REALTIME) as one JSON object, times in microseconds from
  // `base_time_ns` (the file's baseTimeNanoseconds): thread and helper
  // process names, samples, off-CPU slices. Returns how many samples and
  // off-CPU intervals it wrote.
  struct Written {
    uint64_t samples = 0;
    uint64_t off_cpu_intervals = 0;
  };
  virtual Written Write(int64_t base_time_ns, int64_t window_start_ns, int64_t window_end_ns,
                        absl::FunctionRef<void(absl::string_view)> sink) const = 0;
};

// What a finished recording gives: its summary (STATE_RECORDED with the
// counts, or STATE_UNAVAILABLE with the reason) and, when recorded, the
// events.
struct HostContextOutput {
  v1::HostContextResult summary;
  std::shared_ptr<const HostContextEvents> events;
};

// The daemon's sampling of traced processes' threads (perf_event_open),
// one recording per traced process and its descendants. Implemented over
// daemon/hostctx by the runtime; the core holds only this interface.
//
// Thread: Start and Finish are called on the core's event loop and return
// at once; the recording, /proc scans, symbolization and rendering run on
// the implementation's own threads. `done` may be called on any thread.
class HostContextSource {
 public:
  using Key = uint64_t;
  using Done = absl::AnyInvocable<void(HostContextOutput) &&>;
  virtual ~HostContextSource() = default;
  // Begins recording the threads of `pid` (the daemon's view) and of its
  // descendants, now and as they appear, under `key` (unique per call).
  // A failure to record (no privilege, the process gone) is reported by
  // Finish as STATE_UNAVAILABLE.
  virtual void Start(Key key, int32_t pid, HostContextWanted wanted) = 0;
  // Ends the recording of `key` and calls `done` with its outcome once it
  // is symbolized. Exactly once per Start.
  virtual void Finish(Key key, Done done) = 0;
};

// A HostContextResult saying host context was not recorded, and why.
v1::HostContextResult HostContextUnavailable(std::string reason);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_HOST_CONTEXT_H_
