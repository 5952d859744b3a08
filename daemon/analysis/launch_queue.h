#ifndef GPUCTL_DAEMON_ANALYSIS_LAUNCH_QUEUE_H_
#define GPUCTL_DAEMON_ANALYSIS_LAUNCH_QUEUE_H_

#include <cstdint>
#include <vector>

#include "daemon/analysis/diagnoses.h"
#include "daemon/analysis/finding.h"
#include "daemon/analysis/model_index.h"
#include "daemon/analysis/trace_model.h"

// Launch queue length per stream (docs/analyze.md): at each launch, how
// many ops launched earlier on the same stream had not yet finished. CUDA
// queues about 1024 per stream; a launch beyond that blocks the host.
namespace gpuctl::analysis {

struct StreamQueue {
  int32_t device = 0;
  int64_t stream = 0;
  Percentiles depth;  // over the stream's launches
  // Launch calls made at a depth of at least the limit, and their host time.
  uint64_t full_launches = 0;
  int64_t full_launch_host_ns = 0;
  TimeSpan deepest;  // the launch call at the largest depth (the first of equals)
};

struct LaunchQueueStats {
  // Streams with launches, deepest first (ties by device, stream).
  std::vector<StreamQueue> streams;
};

// Ops launched by a kernel launch or an async copy/memset call (by
// correlation; graph launches and synchronous calls are not queued one op
// per call) count; `limit` is options.launch_queue_limit.
LaunchQueueStats ComputeLaunchQueues(const TraceModel& model, const ModelIndex& index,
                                     int64_t limit);

// `launch_queue_full`: a stream whose depth reached options.launch_queue_limit.
std::vector<Finding> LaunchQueueFindings(const TraceModel& model, const LaunchQueueStats& stats,
                                         const AnalyzeOptions& options);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_LAUNCH_QUEUE_H_
