#ifndef GPUCTL_DAEMON_ANALYSIS_ANALYZE_H_
#define GPUCTL_DAEMON_ANALYSIS_ANALYZE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/analysis/communication.h"
#include "daemon/analysis/device_memory.h"
#include "daemon/analysis/diagnoses.h"
#include "daemon/analysis/finding.h"
#include "daemon/analysis/host_context.h"
#include "daemon/analysis/launch_queue.h"
#include "daemon/analysis/occupancy.h"
#include "daemon/analysis/summary.h"
#include "daemon/analysis/trace_model.h"

namespace gpuctl::analysis {

// Everything the diagnoses found about one process's trace.
struct TraceReport {
  TraceInfo info;
  uint64_t gpu_ops = 0, api_calls = 0, syncs = 0, ranges = 0;
  Breakdown breakdown;
  IdleGaps gaps;
  LaunchStats launch;
  CopyStats copies;
  SyncStats sync;
  Percentiles step_ns;  // durations of the whole steps
  TopOps top;
  DeviceMemoryStats memory;
  // NCCL kernels; `communication.across` is filled by AnalyzeRanks.
  CommunicationReport communication;
  OccupancyStats occupancy;
  LaunchQueueStats launch_queue;
  HostContext host;  // what the threads did on the CPU (gpuctld's host context)
  // The numbers gpuctld stores in the manifest at ingest (summary.h).
  ProcessSummary summary;
  std::vector<Finding> findings;
};

// Runs every diagnosis over `model`. Pure; the model can be dropped after.
TraceReport AnalyzeModel(const TraceModel& model, const AnalyzeOptions& options);

// The findings of all reports in the order to read them: data quality first,
// then by recoverable time, largest first.
std::vector<Finding> RankFindings(const std::vector<TraceReport>& reports);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_ANALYZE_H_
