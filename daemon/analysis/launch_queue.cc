#include "daemon/analysis/launch_queue.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/analysis/units.h"

namespace gpuctl::analysis {
namespace {

// One queued op: its launching call and when the op finished.
struct Queued {
  const ApiCall* call = nullptr;
  int64_t end_ns = 0;
};

bool QueuesOneOp(const GpuOp& op, const ApiCall* call) {
  return call != nullptr && !op.graph &&
         (call->kind == ApiKind::kKernelLaunch || call->kind == ApiKind::kMemcpyAsync);
}

// The depth at each launch of one stream: a sweep in launch order, with the
// ends of the ops still queued in a min-heap.
StreamQueue Sweep(int32_t device, int64_t stream, std::vector<Queued>& ops, int64_t limit) {
  std::sort(ops.begin(), ops.end(), [](const Queued& a, const Queued& b) {
    return std::tie(a.call->start_ns, a.end_ns) < std::tie(b.call->start_ns, b.end_ns);
  });
  StreamQueue q;
  q.device = device;
  q.stream = stream;
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<>> pending;
  std::vector<int64_t> depths;
  depths.reserve(ops.size());
  int64_t deepest = -1;
  for (const Queued& op : ops) {
    const int64_t launch = op.call->start_ns;
    while (!pending.empty() && pending.top() <= launch) pending.pop();
    const auto depth = static_cast<int64_t>(pending.size());
    depths.push_back(depth);
    if (depth > deepest) {
      deepest = depth;
      q.deepest = TimeSpan{op.call->start_ns, op.call->end_ns};
    }
    if (depth >= limit) {
      ++q.full_launches;
      q.full_launch_host_ns += op.call->end_ns - op.call->start_ns;
    }
    pending.push(op.end_ns);
  }
  q.depth = ComputePercentiles(std::move(depths));
  return q;
}

}  // namespace

LaunchQueueStats ComputeLaunchQueues(const TraceModel& model, const ModelIndex& index,
                                     int64_t limit) {
  LaunchQueueStats stats;
  std::vector<Queued> ops;
  // gpu_ops are sorted by (device, stream): one stream's ops are adjacent.
  for (size_t i = 0; i < model.gpu_ops.size();) {
    const GpuOp& first = model.gpu_ops[i];
    ops.clear();
    size_t j = i;
    for (; j < model.gpu_ops.size() && model.gpu_ops[j].device == first.device &&
           model.gpu_ops[j].stream == first.stream;
         ++j) {
      const GpuOp& op = model.gpu_ops[j];
      const ApiCall* call = index.CallOfOp(j);
      if (QueuesOneOp(op, call)) ops.push_back(Queued{call, op.end_ns});
    }
    if (!ops.empty()) stats.streams.push_back(Sweep(first.device, first.stream, ops, limit));
    i = j;
  }
  std::sort(stats.streams.begin(), stats.streams.end(),
            [](const StreamQueue& a, const StreamQueue& b) {
              return std::tie(b.depth.max, a.device, a.stream) <
                     std::tie(a.depth.max, b.device, b.stream);
            });
  return stats;
}

std::vector<Finding> LaunchQueueFindings(const TraceModel& model, const LaunchQueueStats& stats,
                                         const AnalyzeOptions& options) {
  std::vector<Finding> out;
  for (const StreamQueue& q : stats.streams) {
    if (q.depth.max < options.launch_queue_limit) break;  // deepest first
    Finding f;
    f.id = "launch_queue_full";
    f.trace = model.info.path;
    f.rank = model.info.rank;
    // What the host spent in launches made into a full queue: time it was
    // blocked rather than doing the next step's host work.
    f.recoverable_ns = q.full_launch_host_ns;
    f.at = q.deepest;
    f.title = absl::StrCat("GPU ", q.device, " stream ", q.stream, " had ", q.depth.max,
                           " launched ops not yet finished (p99 ", q.depth.p99, "); ",
                           q.full_launches, " launches at ", options.launch_queue_limit,
                           " or more took ", FormatNs(q.full_launch_host_ns), " of host time");
    f.advice =
        "CUDA queues about 1024 ops per stream, past that a launch blocks the host: the GPU is "
        "the bottleneck here; fewer, larger kernels (CUDA graphs, fusion) shorten the queue";
    f.numbers = {{"max_depth", static_cast<double>(q.depth.max)},
                 {"p99_depth", static_cast<double>(q.depth.p99)},
                 {"launches", static_cast<double>(q.depth.count)},
                 {"full_launches", static_cast<double>(q.full_launches)},
                 {"full_launch_host_ns", static_cast<double>(q.full_launch_host_ns)}};
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace gpuctl::analysis
