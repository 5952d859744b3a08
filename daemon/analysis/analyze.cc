#include "daemon/analysis/analyze.h"

#include <algorithm>
#include <utility>

#include "daemon/analysis/model_index.h"
#include "daemon/analysis/summary.h"

namespace gpuctl::analysis {

TraceReport AnalyzeModel(const TraceModel& model, const AnalyzeOptions& options) {
  TraceReport r;
  r.info = model.info;
  r.gpu_ops = model.gpu_ops.size();
  r.api_calls = model.api_calls.size();
  r.syncs = model.syncs.size();
  r.ranges = model.ranges.size();
  const ModelIndex index(model);
  r.breakdown = ComputeBreakdown(model);
  r.gaps = ClassifyIdleGaps(model, index, r.breakdown, options);
  r.launch = ComputeLaunchStats(model, index, r.breakdown, options);
  r.copies = ComputeCopyStats(model, index);
  r.sync = ComputeSyncStats(model, index, r.breakdown);
  r.top = ComputeTopOps(model);
  r.step_ns = WholeStepDurations(r.breakdown);
  r.memory = ComputeDeviceMemory(model, r.breakdown);
  r.communication = ComputeCommunication(model, r.breakdown);
  r.occupancy = ComputeOccupancy(model);
  r.launch_queue = ComputeLaunchQueues(model, index, options.launch_queue_limit);
  r.host = ComputeHostContext(model, r.breakdown, r.gaps);
  r.summary = Summarize(r.breakdown, r.top);

  std::vector<Finding> quality = DataQualityFindings(model, r.breakdown);
  const bool incomplete = std::any_of(quality.begin(), quality.end(),
                                      [](const Finding& f) { return f.low_confidence; });
  for (std::vector<Finding> found : {BreakdownFindings(model, r.breakdown, options),
                                     IdleGapFindings(model, r.breakdown, r.gaps, options),
                                     LaunchFindings(model, r.breakdown, r.gaps, r.launch, options),
                                     CopyFindings(model, r.breakdown, r.copies, options),
                                     SyncFindings(model, r.breakdown, r.sync, options),
                                     OccupancyFindings(model, r.breakdown, r.occupancy, options),
                                     LaunchQueueFindings(model, r.launch_queue, options),
                                     DeviceMemoryFindings(model, r.memory, options)}) {
    for (Finding& f : found) {
      f.low_confidence = incomplete;
      r.findings.push_back(std::move(f));
    }
  }
  for (Finding& f : HostContextFindings(model, r.breakdown, r.gaps, r.host, options)) {
    f.low_confidence = incomplete;
    r.findings.push_back(std::move(f));
  }
  r.findings.insert(r.findings.begin(), quality.begin(), quality.end());
  return r;
}

std::vector<Finding> RankFindings(const std::vector<TraceReport>& reports) {
  std::vector<Finding> all;
  for (const TraceReport& r : reports) all.insert(all.end(), r.findings.begin(), r.findings.end());
  std::stable_sort(all.begin(), all.end(), [](const Finding& a, const Finding& b) {
    if (a.data_quality != b.data_quality) return a.data_quality;
    return a.recoverable_ns > b.recoverable_ns;
  });
  return all;
}

}  // namespace gpuctl::analysis
