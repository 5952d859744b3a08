#include "daemon/analysis/model_index.h"

#include <algorithm>

namespace gpuctl::analysis {
namespace {

bool LaunchesWork(ApiKind kind) {
  return kind == ApiKind::kKernelLaunch || kind == ApiKind::kGraphLaunch ||
         kind == ApiKind::kMemcpySync || kind == ApiKind::kMemcpyAsync;
}

}  // namespace

ModelIndex::ModelIndex(const TraceModel& model) : model_(model) {
  for (const ApiCall& call : model.api_calls) {
    if (call.correlation == 0) continue;
    auto [it, inserted] = calls_.try_emplace(call.correlation, &call);
    if (!inserted && !LaunchesWork(it->second->kind) && LaunchesWork(call.kind)) {
      it->second = &call;
    }
    if (call.kind == ApiKind::kSynchronize || call.kind == ApiKind::kMemcpySync) {
      blocking_ends_[{call.pid, call.tid}].push_back(call.end_ns);
    }
  }
  for (auto& [thread, ends] : blocking_ends_) std::sort(ends.begin(), ends.end());
  op_calls_.reserve(model.gpu_ops.size());
  for (const GpuOp& op : model.gpu_ops) op_calls_.push_back(CallOf(op.correlation));
  max_end_.resize(model.ranges.size());
  for (size_t i = 0; i < model.ranges.size(); ++i) {
    const HostRange& r = model.ranges[i];
    Span& span = thread_ranges_[{r.pid, r.tid}];
    const bool first = span.begin == span.end;
    if (first) span.begin = i;
    span.end = i + 1;
    max_end_[i] = first ? r.end_ns : std::max(max_end_[i - 1], r.end_ns);
  }
}

const ApiCall* ModelIndex::CallOf(uint64_t correlation) const {
  if (correlation == 0) return nullptr;
  auto it = calls_.find(correlation);
  return it == calls_.end() ? nullptr : it->second;
}

template <typename Accept>
const HostRange* ModelIndex::Scan(int64_t pid, int64_t tid, int64_t a, int64_t b,
                                  Accept accept) const {
  auto it = thread_ranges_.find({pid, tid});
  if (it == thread_ranges_.end()) return nullptr;
  const std::vector<HostRange>& ranges = model_.ranges;
  const size_t begin = it->second.begin;
  // The ranges that start before b; walk back while one could still reach a.
  size_t i = static_cast<size_t>(
      std::partition_point(ranges.begin() + static_cast<std::ptrdiff_t>(begin),
                           ranges.begin() + static_cast<std::ptrdiff_t>(it->second.end),
                           [b](const HostRange& r) { return r.start_ns < b; }) -
      ranges.begin());
  const HostRange* best = nullptr;
  for (int scanned = 0; i > begin && scanned < kMaxRangeScan; ++scanned) {
    --i;
    if (max_end_[i] <= a) break;
    if (ranges[i].end_ns > a && accept(ranges[i], best)) best = &ranges[i];
  }
  return best;
}

const HostRange* ModelIndex::MostOverlapping(int64_t pid, int64_t tid, int64_t a, int64_t b) const {
  auto overlap = [a, b](const HostRange& r) {
    return std::min(b, r.end_ns) - std::max(a, r.start_ns);
  };
  return Scan(pid, tid, a, b, [&](const HostRange& r, const HostRange* best) {
    if (best == nullptr) return overlap(r) > 0 || a == b;
    int64_t o = overlap(r), ob = overlap(*best);
    return o > ob || (o == ob && r.end_ns - r.start_ns < best->end_ns - best->start_ns);
  });
}

const HostRange* ModelIndex::Innermost(int64_t pid, int64_t tid, int64_t a, int64_t b) const {
  return Scan(pid, tid, a, b, [&](const HostRange& r, const HostRange* best) {
    if (r.start_ns > a || r.end_ns < b) return false;
    return best == nullptr || r.end_ns - r.start_ns < best->end_ns - best->start_ns;
  });
}

bool ModelIndex::BlockingCallEndedIn(int64_t pid, int64_t tid, int64_t a, int64_t b) const {
  auto it = blocking_ends_.find({pid, tid});
  if (it == blocking_ends_.end()) return false;
  auto end = std::lower_bound(it->second.begin(), it->second.end(), a);
  return end != it->second.end() && *end <= b;
}

}  // namespace gpuctl::analysis
