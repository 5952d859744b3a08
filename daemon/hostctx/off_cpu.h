#ifndef GPUCTL_DAEMON_HOSTCTX_OFF_CPU_H_
#define GPUCTL_DAEMON_HOSTCTX_OFF_CPU_H_

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "daemon/hostctx/perf_record.h"
#include "daemon/hostctx/sampler.h"

namespace gpuctl::hostctx {

enum class OffCpuReason {
  kBlocked,    // switched out waiting (sleep, I/O, a lock, a futex)
  kPreempted,  // switched out while runnable: another task took the CPU
  kUnknown,    // already off the CPU when the capture began
};

absl::string_view OffCpuReasonName(OffCpuReason reason);

struct OffCpuInterval {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  OffCpuReason reason = OffCpuReason::kBlocked;
  // The thread's call chain as it left the CPU: an index into
  // HostCapture::switch_stacks, or -1 when none was recorded.
  int64_t stack = -1;
  // A preempted interval: the process that took the thread's CPU (the
  // daemon's pid, HostCapture::preemptions), or 0 when unknown.
  uint32_t preempted_by = 0;
};

// A switch-out's call chain is sampled just before its switch record: the
// two are paired when at most this far apart.
inline constexpr uint64_t kSwitchStackSlackNs = 1'000'000;

// The intervals each thread spent off the CPU within [window_start_ns,
// window_end_ns], from its switch-out and switch-in records (in any order,
// threads mixed). A thread switched out at the end is off until the window
// ends; one whose first record is a switch-in was off since it began
// (kUnknown). Sorted by thread, then time.
std::vector<OffCpuInterval> OffCpuIntervals(absl::Span<const ContextSwitch> switches,
                                            uint64_t window_start_ns, uint64_t window_end_ns);

// The off-CPU intervals of a capture: those of its switch records, within
// its window, with a thread's leading `unknown` interval starting when its
// event opened; and a thread with no record at all (neither a sample nor a
// switch: off the CPU from its opening to the end) as one `unknown`
// interval over that span. A blocked or preempted interval that begins at
// a switch-out carries the chain sampled at it (`stack`), when recorded; a
// preempted one the process that took its CPU (`preempted_by`), when a
// CPU-wide event saw that switch-out.
std::vector<OffCpuInterval> OffCpuIntervals(const HostCapture& capture);

}  // namespace gpuctl::hostctx

#endif  // GPUCTL_DAEMON_HOSTCTX_OFF_CPU_H_
