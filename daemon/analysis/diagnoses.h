#ifndef GPUCTL_DAEMON_ANALYSIS_DIAGNOSES_H_
#define GPUCTL_DAEMON_ANALYSIS_DIAGNOSES_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/analysis/finding.h"
#include "daemon/analysis/model_index.h"
#include "daemon/analysis/trace_model.h"

// The diagnoses: pure functions of one process's model (and the index built
// from it), each returning its numbers; the *Findings functions turn them
// into findings under the options' thresholds. Definitions: docs/analyze.md.
namespace gpuctl::analysis {

// ---- Time breakdown --------------------------------------------------------

// Every instant from the first to the last GPU activity goes to one class:
// compute when a non-NCCL kernel runs, else communication when an NCCL
// kernel runs, else memory when a copy or memset runs, else idle. So the
// four add up to the span. Synchronization records are host time, never
// GPU work.
struct ClassTimes {
  int64_t start_ns = 0, end_ns = 0;  // first and last GPU activity
  int64_t compute_ns = 0, communication_ns = 0, memory_ns = 0, idle_ns = 0;
  int64_t span_ns() const { return end_ns - start_ns; }
};

struct StreamTimes {
  int64_t stream = 0;
  uint64_t ops = 0;
  ClassTimes times;
};

struct DeviceTimes {
  int32_t device = 0;
  ClassTimes times;
  // NCCL kernel time that ran while a compute kernel ran on the device.
  int64_t communication_overlapped_ns = 0;
  std::vector<StreamTimes> streams;
  // The instants no op of the device ran, between its first and last op.
  std::vector<std::pair<int64_t, int64_t>> idle;
};

// A step: a "ProfilerStep#N" host range (merged across threads by N), and the
// process's GPU time within it; the GPU's time outside its first-to-last
// span counts as idle.
struct StepTimes {
  int64_t number = 0;
  int64_t start_ns = 0, end_ns = 0;
  bool clipped = false;  // ends at the capture window's end: not a whole step
  int64_t compute_ns = 0, communication_ns = 0, memory_ns = 0, idle_ns = 0;
};

// The process's GPU busy time (any class but idle, all devices as one) in
// at most kTimelineBuckets equal buckets across the capture window (the GPU
// span when the window is unknown): bucket i covers
// [start_ns + i * bucket_ns, min(start_ns + (i + 1) * bucket_ns, end_ns)).
inline constexpr int kTimelineBuckets = 100;
struct BusyTimeline {
  int64_t start_ns = 0, end_ns = 0, bucket_ns = 0;
  std::vector<int64_t> busy_ns;  // one per bucket
  int64_t BucketEnd(size_t i) const {
    return std::min(end_ns, start_ns + static_cast<int64_t>(i + 1) * bucket_ns);
  }
};

struct Breakdown {
  ClassTimes process;  // all devices of the process as one
  std::vector<DeviceTimes> devices;
  std::vector<StepTimes> steps;
  BusyTimeline timeline;
  // The longest stretch in which NCCL kernels ran and no compute kernel did
  // (exposed communication); empty when none.
  TimeSpan longest_exposed_communication;
};

Breakdown ComputeBreakdown(const TraceModel& model);

// ---- Idle gaps -------------------------------------------------------------

enum class GapClass : uint8_t { kHostBound, kSyncDrain, kLaunchOverhead, kOther };
inline constexpr int kGapClasses = 4;
const char* GapClassName(GapClass c);

struct GapTotals {
  uint64_t count = 0;
  int64_t stream_idle_ns = 0;  // the gaps' length on their stream
  int64_t gpu_idle_ns = 0;     // the part when no stream of the device ran
  // The gap with the most GPU-idle time (the first of equals); empty when
  // none had any.
  TimeSpan largest;
  int64_t largest_gpu_idle_ns = 0;
};

struct NamedTime {
  std::string name;
  int64_t ns = 0;
  uint64_t count = 0;
};

// A host-bound gap with GPU-idle time: the gap on its stream, and the
// thread that launched the op after it.
struct HostBoundGap {
  int64_t start_ns = 0, end_ns = 0;
  int32_t device = 0;
  int64_t pid = 0, tid = 0;
};

struct IdleGaps {
  std::array<GapTotals, kGapClasses> classes;
  // Every host-bound gap with GPU-idle time, in the order of the model's
  // GPU ops (what the launching thread did then: host_context.h).
  std::vector<HostBoundGap> host_bound;
  // Host-bound GPU-idle time by the host range that covered it most, largest
  // first (at most 5); "(no range)" when none did.
  std::vector<NamedTime> host_bound_ranges;
  // GPU-idle time of gaps (other than sync drains) that end at a small
  // kernel: what fewer, larger launches could recover.
  int64_t before_small_kernel_gpu_idle_ns = 0;
};

IdleGaps ClassifyIdleGaps(const TraceModel& model, const ModelIndex& index,
                          const Breakdown& breakdown, const AnalyzeOptions& options);

// ---- Launches and small kernels ---------------------------------------------

struct Percentiles {
  uint64_t count = 0;
  int64_t p50 = 0, p90 = 0, p99 = 0, max = 0;
};
Percentiles ComputePercentiles(std::vector<int64_t> values);

struct LaunchStats {
  uint64_t kernels = 0, small_kernels = 0;
  int64_t kernel_ns = 0, small_kernel_ns = 0;
  uint64_t kernel_launch_calls = 0, graph_launch_calls = 0, graph_kernels = 0;
  Percentiles launch_delay_ns;   // kernel start - end of its launch call
  Percentiles kernels_per_step;  // whole steps only
};

LaunchStats ComputeLaunchStats(const TraceModel& model, const ModelIndex& index,
                               const Breakdown& breakdown, const AnalyzeOptions& options);

// ---- Copies -----------------------------------------------------------------

struct CopyDirectionStats {
  uint64_t count = 0, bytes = 0;
  int64_t busy_ns = 0;
  double gbps() const {
    return busy_ns > 0 ? static_cast<double>(bytes) / static_cast<double>(busy_ns) : 0;
  }
};

struct CopyStats {
  std::array<CopyDirectionStats, kCopyDirections> directions;
  uint64_t memsets = 0;
  // Copies and memsets whose call returns when the GPU is done.
  uint64_t sync_copies = 0;
  int64_t sync_copy_host_ns = 0;
  // Async copies from or to pageable memory, which the driver stages and
  // runs synchronously.
  uint64_t pageable_async_copies = 0, pageable_async_bytes = 0;
  int64_t pageable_async_ns = 0;
  // The longest synchronous copy call (host time) and the longest pageable
  // async copy (GPU time); empty when none.
  TimeSpan longest_sync_copy, longest_pageable_async;
};

CopyStats ComputeCopyStats(const TraceModel& model, const ModelIndex& index);

// ---- Top kernels and copies ---------------------------------------------------

// Rows of the top tables: GPU ops of one name.
inline constexpr size_t kTopOps = 10;
struct OpTotals {
  std::string name;
  uint64_t count = 0;
  int64_t total_ns = 0, max_ns = 0;
  uint64_t bytes = 0;  // copies and memsets
};

// Kernels (compute and NCCL) and copies/memsets by name, by total GPU time,
// largest first (ties by name), at most kTopOps of each.
struct TopOps {
  std::vector<OpTotals> kernels, copies;
  // Every kernel name, in the same order (kernels is its head): what a
  // comparison of two traces needs to tell a new kernel from a demoted one.
  std::vector<OpTotals> all_kernels;
};

TopOps ComputeTopOps(const TraceModel& model);

// ---- Synchronization stalls ---------------------------------------------------

// Host time in synchronize calls; in a trace without runtime calls, in the
// host-blocking synchronization records instead (not "Stream Wait Event").
struct SyncStats {
  uint64_t calls = 0;
  int64_t host_ns = 0;
  // Host time in synchronize calls by step (same order as the breakdown's
  // steps).
  std::vector<int64_t> per_step_ns;
  // By the innermost host range around the call, largest first (at most 5).
  std::vector<NamedTime> call_sites;
  // By the call's (or the record's) own name, largest first (at most
  // kTopOps).
  std::vector<NamedTime> by_call;
  TimeSpan longest;  // the longest stall; empty when none
};

SyncStats ComputeSyncStats(const TraceModel& model, const ModelIndex& index,
                           const Breakdown& breakdown);

// ---- Findings ----------------------------------------------------------------

std::vector<Finding> DataQualityFindings(const TraceModel& model, const Breakdown& breakdown);
std::vector<Finding> BreakdownFindings(const TraceModel& model, const Breakdown& breakdown,
                                       const AnalyzeOptions& options);
std::vector<Finding> IdleGapFindings(const TraceModel& model, const Breakdown& breakdown,
                                     const IdleGaps& gaps, const AnalyzeOptions& options);
std::vector<Finding> LaunchFindings(const TraceModel& model, const Breakdown& breakdown,
                                    const IdleGaps& gaps, const LaunchStats& launch,
                                    const AnalyzeOptions& options);
std::vector<Finding> CopyFindings(const TraceModel& model, const Breakdown& breakdown,
                                  const CopyStats& copies, const AnalyzeOptions& options);
std::vector<Finding> SyncFindings(const TraceModel& model, const Breakdown& breakdown,
                                  const SyncStats& syncs, const AnalyzeOptions& options);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_DIAGNOSES_H_
