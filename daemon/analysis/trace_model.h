#ifndef GPUCTL_DAEMON_ANALYSIS_TRACE_MODEL_H_
#define GPUCTL_DAEMON_ANALYSIS_TRACE_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/analysis/host_events.h"

namespace gpuctl::analysis {

// The normalised event model every diagnosis reads: one process's trace,
// gpuctl's own Chrome-trace JSON or a kineto (PyTorch profiler) trace,
// reduced to the events the diagnoses use. Times are nanoseconds on the
// trace's own `ts` axis (`ts` µs * 1000, exact for the three decimals both
// writers use); names are indices into TraceModel::names. A few dozen bytes
// per event: no JSON, no strings per event.

enum class GpuOpKind : uint8_t { kKernel, kCommKernel, kMemcpy, kMemset };
enum class CopyDirection : uint8_t { kHtoD, kDtoH, kDtoD, kHtoH, kPtoP, kOther };
inline constexpr int kCopyDirections = 6;

// What a CUDA runtime or driver call is for the diagnoses.
enum class ApiKind : uint8_t {
  kOther,
  kKernelLaunch,  // cudaLaunchKernel*, cuLaunchKernel*, cooperative launches
  kGraphLaunch,   // cudaGraphLaunch, cuGraphLaunch
  kSynchronize,   // device, context, stream and event synchronize calls
  kMemcpySync,    // a copy or memset call that returns when the GPU is done
  kMemcpyAsync,   // *Async copies and memsets
};

// A kernel's launch configuration and the occupancy figures its writer
// derived from it and the device (gpuctl's converter and kineto write the
// same args: "grid", "block", "registers per thread", "shared memory",
// "blocks per SM", "warps per SM", "est. achieved occupancy %"). Negative
// or 0 where the file does not say. Kernels share one entry per distinct
// configuration (TraceModel::launches).
struct KernelLaunch {
  float blocks_per_sm = -1, warps_per_sm = -1;
  int32_t occupancy_pct = -1;
  uint32_t block_threads = 0, registers_per_thread = 0, shared_memory_bytes = 0;
  uint64_t grid_blocks = 0;
};
inline constexpr uint32_t kNoLaunch = 0xffffffff;

struct GpuOp {
  int64_t start_ns = 0, end_ns = 0;
  uint64_t bytes = 0;        // copies and memsets
  uint64_t correlation = 0;  // 0: none
  uint32_t name = 0;
  int32_t device = 0;
  int64_t stream = 0;
  GpuOpKind kind = GpuOpKind::kKernel;
  CopyDirection direction = CopyDirection::kOther;
  bool pageable = false;  // a copy from or to pageable host memory
  bool graph = false;     // launched from a CUDA graph
  // Kernels: the index of their launch args in TraceModel::launches.
  uint32_t launch = kNoLaunch;
};

struct ApiCall {
  int64_t start_ns = 0, end_ns = 0;
  uint64_t correlation = 0;
  int64_t pid = 0, tid = 0;
  uint32_t name = 0;
  ApiKind kind = ApiKind::kOther;
};

// A host-blocking synchronization record (`cat` "cuda_sync"): time the host
// waited, never GPU work.
struct SyncRecord {
  int64_t start_ns = 0, end_ns = 0;
  uint64_t correlation = 0;
  uint32_t name = 0;
  int32_t device = -1;
  int64_t stream = -1;
};

// A host range: gpuctl ranges, NVTX ranges and kineto's user annotations
// (`cat` "user_annotation"), and kineto's operators (`cpu_op`).
struct HostRange {
  int64_t start_ns = 0, end_ns = 0;
  int64_t pid = 0, tid = 0;
  uint32_t name = 0;
  bool cpu_op = false;
};

// A step mark: a "ProfilerStep#N" range.
struct Step {
  int64_t start_ns = 0, end_ns = 0;
  int64_t number = 0;
  int64_t pid = 0, tid = 0;
};

// A sample of one device's allocated memory after an allocation or free:
// gpuctl's "Device memory allocated (GPU N)" counter (CUDA driver
// allocations seen by CUPTI, counted from 0 at the window's start, so it
// may go below 0), or PyTorch's "[memory]" events in kineto's traces (the
// caching allocator's "Total Allocated", absolute).
struct MemorySample {
  int64_t ts_ns = 0;
  int64_t bytes = 0;
  int32_t device = 0;
  bool allocator = false;  // PyTorch's caching allocator's view
  // The allocator's "Total Reserved": what its cache holds of the device
  // (allocated bytes plus cached free blocks); -1 when not written.
  int64_t reserved = -1;
};

// A device's memory size (deviceProperties' totalGlobalMem).
struct DeviceMemoryTotal {
  int32_t device = 0;
  uint64_t bytes = 0;
};

enum class TraceFormat : uint8_t { kGpuctl, kKineto };

// What the trace says about itself: gpuctl's `gpuctl` member, kineto's
// `distributedInfo` and profiler span, and what the reader saw.
struct TraceInfo {
  std::string path;
  TraceFormat format = TraceFormat::kKineto;
  bool gzip = false;
  std::string host, trace_id;
  int64_t pid = -1, rank = -1, world_size = -1;
  int64_t base_time_ns = 0;
  // gpuctl's metadata (has_gpuctl_meta false for kineto's files).
  bool has_gpuctl_meta = false;
  uint64_t dropped_events = 0, cupti_dropped_records = 0, dropped_at_cap = 0;
  bool host_only = false;
  std::string host_only_reason;
  bool cupti_failed = false;
  std::string cupti_message;
  bool has_activities = false;
  std::vector<std::string> activities;
  // The capture window on the `ts` axis; has_window false when unknown.
  bool has_window = false;
  int64_t window_start_ns = 0, window_end_ns = 0;
  uint32_t device_count = 0;  // deviceProperties entries
  // Events read, and those skipped: no usable `ts`, a negative `dur`, or a
  // shape the reader does not know.
  uint64_t events = 0, skipped_events = 0;
  // What the trace's manifest (docs/trace-format.md) says of this process's
  // capture, when the file was read from a trace directory that has one
  // (has_manifest; the reader leaves these unset): the window opened later
  // than the request's start allowed (late_start, start_skew_ns after the
  // start instant), or the process attached after the request and joined
  // the trace (joined_late).
  bool has_manifest = false, late_start = false, joined_late = false;
  int64_t start_skew_ns = 0;
};

struct TraceModel {
  TraceInfo info;
  std::vector<std::string> names;
  std::vector<GpuOp> gpu_ops;                    // sorted by (device, stream, start)
  std::vector<ApiCall> api_calls;                // sorted by start
  std::vector<SyncRecord> syncs;                 // sorted by start
  std::vector<HostRange> ranges;                 // sorted by (pid, tid, start)
  std::vector<Step> steps;                       // sorted by start
  std::vector<MemorySample> memory;              // sorted by (device, allocator, ts)
  std::vector<DeviceMemoryTotal> device_memory;  // sorted by device

  HostEvents host;  // gpuctld's host context (cpu, sched activities)
  // The distinct launch configurations of the kernels, in first-seen order.
  std::vector<KernelLaunch> launches;

  const std::string& Name(uint32_t index) const { return names[index]; }
};

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_TRACE_MODEL_H_
