#ifndef GPUCTL_DAEMON_ANALYSIS_HOST_CONTEXT_H_
#define GPUCTL_DAEMON_ANALYSIS_HOST_CONTEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/analysis/diagnoses.h"
#include "daemon/analysis/finding.h"
#include "daemon/analysis/trace_model.h"

// What the traced threads did on the CPU, from gpuctld's host context
// (host_events.h): over the window, and in the host-bound GPU-idle gaps,
// where it says why the host did not launch. Definitions: docs/analyze.md,
// "Host context".
namespace gpuctl::analysis {

inline constexpr size_t kTopHostSites = 5;     // sites, preemptors, functions
inline constexpr size_t kMaxHostThreads = 16;  // threads listed

// Where a stretch of some threads' time went. Blocked sites are named
// "top <- caller" from the stack each thread left the CPU with, "(no
// stack)" without one; preemptors as the trace names them, "(not named)"
// when it does not. On-CPU time is split among the sampled innermost
// functions by their samples (NamedTime::count).
struct CpuAttribution {
  int64_t total_ns = 0;  // the thread time looked at
  int64_t on_cpu_ns = 0, blocked_ns = 0, preempted_ns = 0, unknown_ns = 0;
  uint64_t samples = 0;
  std::vector<NamedTime> blocked_in, preempted_by, on_cpu;  // largest first
};

struct ThreadActivity {
  int64_t pid = 0, tid = 0;
  std::string name;  // its thread_name; empty when the trace has none
  // Over the window: thread time, on-CPU time (total_ns is the sum of its
  // off-CPU slices and on_cpu_ns its samples' share: unknown without a
  // window), and the rest.
  CpuAttribution time;
};

struct HostContext {
  bool present = false;  // the trace has cpu_sample or off_cpu events
  uint64_t samples = 0, off_cpu_slices = 0;
  // The threads with the most off-CPU time and samples, at most
  // kMaxHostThreads, the launching threads first.
  std::vector<ThreadActivity> threads;
  // The host-bound gaps whose launching thread has host context: their
  // GPU-idle time (total_ns) by what that thread did in it ...
  uint64_t gaps = 0;
  CpuAttribution launching;
  // ... and what the threads of the helper processes (descendants of the
  // traced process: DataLoader workers) did meanwhile: total_ns is their
  // thread time (threads x GPU-idle time).
  CpuAttribution helpers;
  uint64_t helper_threads = 0;
};

HostContext ComputeHostContext(const TraceModel& model, const Breakdown& breakdown,
                               const IdleGaps& gaps);

// "host_bound_cpu": the host-bound GPU-idle time explained by what the
// launching thread did (blocked in a call, preempted, or running), under
// the options' min_share.
std::vector<Finding> HostContextFindings(const TraceModel& model, const Breakdown& breakdown,
                                         const IdleGaps& gaps, const HostContext& host,
                                         const AnalyzeOptions& options);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_HOST_CONTEXT_H_
