#ifndef GPUCTL_DAEMON_ANALYSIS_DEVICE_MEMORY_H_
#define GPUCTL_DAEMON_ANALYSIS_DEVICE_MEMORY_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "daemon/analysis/diagnoses.h"
#include "daemon/analysis/finding.h"
#include "daemon/analysis/trace_model.h"
#include "nlohmann/json.hpp"

// Diagnosis 10, device memory: per device, the allocated bytes at every
// step boundary and their peak against the device's memory. Definitions:
// docs/analyze.md.
namespace gpuctl::analysis {

// Growth needs at least this many whole steps to be called a trend.
inline constexpr size_t kMinMemoryGrowthSteps = 3;

struct DeviceMemory {
  int32_t device = 0;
  // The samples are PyTorch's caching allocator's "Total Allocated"
  // (kineto's "[memory]" events, absolute); otherwise gpuctl's counter of
  // CUDA driver allocations, from 0 at the capture window's start (what was
  // allocated before is unknown, so every value is a lower bound).
  bool allocator = false;
  uint64_t samples = 0;
  uint64_t total_bytes = 0;  // deviceProperties' totalGlobalMem; 0 unknown
  int64_t peak_bytes = 0;
  int64_t peak_ts_ns = 0;
  // The allocator's peak "Total Reserved" (its cache: allocated bytes plus
  // the freed blocks it keeps), what it holds of the device; -1 when its
  // events do not carry it, and for gpuctl's counter.
  int64_t peak_reserved_bytes = -1;
  int64_t peak_reserved_ts_ns = 0;
  // What memory_peak judges: the reserved peak when known, else peak_bytes.
  int64_t held_peak_bytes() const { return std::max(peak_bytes, peak_reserved_bytes); }
  int64_t held_peak_ts_ns() const {
    return peak_reserved_bytes > peak_bytes ? peak_reserved_ts_ns : peak_ts_ns;
  }
  int64_t last_bytes = 0;  // after the last sample
  // Allocated bytes at the first whole step's start, then at the end of
  // each whole step (step_numbers, in order); for the allocator, only the
  // steps from the first one that starts after its first sample.
  std::vector<int64_t> step_bytes;
  std::vector<int64_t> step_numbers;
  // Never lower at a step's end than at the one before, and higher at the
  // last than at the first, over at least kMinMemoryGrowthSteps steps.
  bool growing = false;
  double growth_bytes_per_step = 0;  // (last - first) / steps, when growing
  // Steps until the device is full at that rate (for gpuctl's counter an
  // upper bound); -1 when not growing or the device's size is unknown.
  int64_t steps_until_full = -1;
};

struct DeviceMemoryStats {
  std::vector<DeviceMemory> devices;  // by device; empty without samples
};

DeviceMemoryStats ComputeDeviceMemory(const TraceModel& model, const Breakdown& breakdown);

// `memory_growth` (growing) and `memory_peak` (peak at least
// options.memory_peak_share of the device). Neither recovers time:
// recoverable_ns is 0 and --min-pct does not apply.
std::vector<Finding> DeviceMemoryFindings(const TraceModel& model, const DeviceMemoryStats& memory,
                                          const AnalyzeOptions& options);

// A trace's "device_memory" array (docs/analyze.md).
nlohmann::json DeviceMemoryJson(const DeviceMemoryStats& memory);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_DEVICE_MEMORY_H_
