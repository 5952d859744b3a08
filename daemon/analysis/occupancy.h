#ifndef GPUCTL_DAEMON_ANALYSIS_OCCUPANCY_H_
#define GPUCTL_DAEMON_ANALYSIS_OCCUPANCY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/analysis/diagnoses.h"
#include "daemon/analysis/finding.h"
#include "daemon/analysis/trace_model.h"

// Diagnosis 8, SM efficiency and estimated occupancy (docs/analyze.md), from
// the kernels' launch args (KernelLaunch). Percentages are -1 where no
// kernel had the figure.
namespace gpuctl::analysis {

struct DeviceOccupancy {
  int32_t device = 0;
  uint64_t kernels = 0;   // kernels with "blocks per SM"
  int64_t kernel_ns = 0;  // their summed time
  int64_t busy_ns = 0;    // the union of their intervals
  // Kineto's SM efficiency: sum of duration x min(blocks per SM, 1) over
  // busy_ns, at most 100.
  double sm_efficiency_pct = -1;
  // "est. achieved occupancy %" weighted by duration.
  double occupancy_pct = -1;
};

// The kernels of one name that carry launch args.
struct KernelOccupancy {
  std::string name;
  bool communication = false;  // NCCL: few blocks by design, never a finding
  uint64_t count = 0;
  int64_t total_ns = 0;
  double sm_efficiency_pct = -1, occupancy_pct = -1;  // duration-weighted
  // SM time left idle because the grid had fewer blocks than SMs: sum of
  // duration x (1 - blocks per SM) over the launches under one block per SM.
  int64_t sm_idle_ns = 0;
  KernelLaunch longest;  // the configuration of its longest launch
};

struct OccupancyStats {
  // Kernels, and those without "blocks per SM" and occupancy figures.
  uint64_t kernels = 0, kernels_without_args = 0;
  std::vector<DeviceOccupancy> devices;
  // Every name with launch args, by total time (largest first, ties by
  // name); the JSON and HTML show the first kTopOps.
  std::vector<KernelOccupancy> kernels_by_time;
};

OccupancyStats ComputeOccupancy(const TraceModel& model);

// `small_grids` (compute kernels with fewer blocks than SMs) and
// `low_occupancy` (compute kernels under options.occupancy_share).
std::vector<Finding> OccupancyFindings(const TraceModel& model, const Breakdown& breakdown,
                                       const OccupancyStats& stats, const AnalyzeOptions& options);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_OCCUPANCY_H_
