#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/analysis/diagnoses.h"

namespace gpuctl::analysis {
namespace {

using Intervals = std::vector<std::pair<int64_t, int64_t>>;

int64_t OverlapWith(const Intervals& idle, int64_t a, int64_t b) {
  auto it =
      std::partition_point(idle.begin(), idle.end(),
                           [a](const std::pair<int64_t, int64_t>& s) { return s.second <= a; });
  int64_t total = 0;
  for (; it != idle.end() && it->first < b; ++it) {
    total += std::min(b, it->second) - std::max(a, it->first);
  }
  return total;
}

bool IsKernel(const GpuOp& op) {
  return op.kind == GpuOpKind::kKernel || op.kind == GpuOpKind::kCommKernel;
}

}  // namespace

const char* GapClassName(GapClass c) {
  switch (c) {
    case GapClass::kHostBound:
      return "host_bound";
    case GapClass::kSyncDrain:
      return "sync_drain";
    case GapClass::kLaunchOverhead:
      return "launch_overhead";
    case GapClass::kOther:
      break;
  }
  return "other";
}

IdleGaps ClassifyIdleGaps(const TraceModel& model, const ModelIndex& index,
                          const Breakdown& breakdown, const AnalyzeOptions& options) {
  IdleGaps out;
  absl::flat_hash_map<int32_t, const Intervals*> device_idle;
  for (const DeviceTimes& d : breakdown.devices) device_idle[d.device] = &d.idle;
  // Host-bound GPU-idle time by covering range (name index, or -1 for none).
  absl::flat_hash_map<int64_t, NamedTime> by_range;

  const std::vector<GpuOp>& ops = model.gpu_ops;
  int64_t busy_until = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const GpuOp& next = ops[i];
    const bool same_stream =
        i > 0 && ops[i - 1].device == next.device && ops[i - 1].stream == next.stream;
    if (!same_stream) {
      busy_until = next.end_ns;
      continue;
    }
    const int64_t a = busy_until, b = next.start_ns;
    busy_until = std::max(busy_until, next.end_ns);
    if (b <= a) continue;
    const ApiCall* launch = index.CallOfOp(i);
    GapClass cls = GapClass::kOther;
    if (launch != nullptr) {
      if (index.BlockingCallEndedIn(launch->pid, launch->tid, a, launch->start_ns)) {
        cls = GapClass::kSyncDrain;
      } else if (launch->start_ns >= a) {
        cls = GapClass::kHostBound;
      } else if (b - a <= options.launch_gap_ns) {
        cls = GapClass::kLaunchOverhead;
      }
    }
    auto idle = device_idle.find(next.device);
    const int64_t gpu_idle = idle == device_idle.end() ? 0 : OverlapWith(*idle->second, a, b);
    GapTotals& totals = out.classes[static_cast<int>(cls)];
    ++totals.count;
    totals.stream_idle_ns += b - a;
    totals.gpu_idle_ns += gpu_idle;
    if (gpu_idle > totals.largest_gpu_idle_ns) {
      totals.largest_gpu_idle_ns = gpu_idle;
      totals.largest = {a, b};
    }
    if (cls == GapClass::kHostBound && gpu_idle > 0) {
      out.host_bound.push_back(HostBoundGap{a, b, next.device, launch->pid, launch->tid});
      const HostRange* range =
          index.MostOverlapping(launch->pid, launch->tid, a, std::max(a, launch->start_ns));
      NamedTime& named = by_range[range == nullptr ? -1 : int64_t{range->name}];
      if (named.name.empty())
        named.name = range == nullptr ? "(no range)" : model.Name(range->name);
      named.ns += gpu_idle;
      ++named.count;
    }
    if (cls != GapClass::kSyncDrain && IsKernel(next) &&
        next.end_ns - next.start_ns < options.small_kernel_ns) {
      out.before_small_kernel_gpu_idle_ns += gpu_idle;
    }
  }
  for (auto& [key, named] : by_range) out.host_bound_ranges.push_back(std::move(named));
  std::sort(out.host_bound_ranges.begin(), out.host_bound_ranges.end(),
            [](const NamedTime& x, const NamedTime& y) {
              return x.ns != y.ns ? x.ns > y.ns : x.name < y.name;
            });
  if (out.host_bound_ranges.size() > 5) out.host_bound_ranges.resize(5);
  return out;
}

}  // namespace gpuctl::analysis
