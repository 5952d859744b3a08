#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/analysis/diagnoses.h"

namespace gpuctl::analysis {

Percentiles ComputePercentiles(std::vector<int64_t> values) {
  Percentiles out;
  out.count = values.size();
  if (values.empty()) return out;
  // Nearest rank: the smallest value with at least p of the values at or
  // below it. Each selection partitions the values, so the next, higher
  // rank is selected among those above the last (linear time, no sort).
  auto from = values.begin();
  auto at = [&](int permille) {
    const size_t rank = (values.size() * static_cast<size_t>(permille) + 999) / 1000;
    const auto nth = values.begin() + static_cast<std::ptrdiff_t>(std::max<size_t>(rank, 1) - 1);
    std::nth_element(from, nth, values.end());
    from = nth;
    return *nth;
  };
  out.p50 = at(500);
  out.p90 = at(900);
  out.p99 = at(990);
  out.max = *std::max_element(from, values.end());
  return out;
}

LaunchStats ComputeLaunchStats(const TraceModel& model, const ModelIndex& index,
                               const Breakdown& breakdown, const AnalyzeOptions& options) {
  LaunchStats out;
  for (const ApiCall& call : model.api_calls) {
    out.kernel_launch_calls += call.kind == ApiKind::kKernelLaunch;
    out.graph_launch_calls += call.kind == ApiKind::kGraphLaunch;
  }
  std::vector<const StepTimes*> steps;
  for (const StepTimes& s : breakdown.steps) {
    if (!s.clipped) steps.push_back(&s);
  }
  std::vector<int64_t> per_step(steps.size(), 0);
  std::vector<int64_t> delays;
  // A graph launch's kernels share its correlation: its delay is to the
  // first of them.
  absl::flat_hash_map<uint64_t, std::pair<int64_t, int64_t>>
      graph_first;  // corr -> (start, call end)
  for (size_t i = 0; i < model.gpu_ops.size(); ++i) {
    const GpuOp& op = model.gpu_ops[i];
    if (op.kind != GpuOpKind::kKernel && op.kind != GpuOpKind::kCommKernel) continue;
    const int64_t dur = op.end_ns - op.start_ns;
    ++out.kernels;
    out.kernel_ns += dur;
    if (dur < options.small_kernel_ns) {
      ++out.small_kernels;
      out.small_kernel_ns += dur;
    }
    out.graph_kernels += op.graph;
    const ApiCall* call = index.CallOfOp(i);
    if (call != nullptr && call->kind == ApiKind::kKernelLaunch) {
      delays.push_back(op.start_ns - call->end_ns);
    } else if (call != nullptr && call->kind == ApiKind::kGraphLaunch) {
      auto [it, inserted] = graph_first.try_emplace(op.correlation, op.start_ns, call->end_ns);
      if (!inserted) it->second.first = std::min(it->second.first, op.start_ns);
    }
    // The step a kernel belongs to is the one its launch was issued in.
    const int64_t t = call != nullptr ? call->start_ns : op.start_ns;
    auto it = std::partition_point(steps.begin(), steps.end(),
                                   [t](const StepTimes* s) { return s->start_ns <= t; });
    if (it != steps.begin() && t < (*(it - 1))->end_ns) ++per_step[(it - 1) - steps.begin()];
  }
  for (const auto& [correlation, first] : graph_first) delays.push_back(first.first - first.second);
  out.launch_delay_ns = ComputePercentiles(std::move(delays));
  out.kernels_per_step = ComputePercentiles(std::move(per_step));
  return out;
}

CopyStats ComputeCopyStats(const TraceModel& model, const ModelIndex& index) {
  CopyStats out;
  for (size_t i = 0; i < model.gpu_ops.size(); ++i) {
    const GpuOp& op = model.gpu_ops[i];
    if (op.kind != GpuOpKind::kMemcpy && op.kind != GpuOpKind::kMemset) continue;
    const ApiCall* call = index.CallOfOp(i);
    if (call != nullptr && call->kind == ApiKind::kMemcpySync) {
      ++out.sync_copies;
      out.sync_copy_host_ns += call->end_ns - call->start_ns;
      if (call->end_ns - call->start_ns >
          out.longest_sync_copy.end_ns - out.longest_sync_copy.start_ns) {
        out.longest_sync_copy = {call->start_ns, call->end_ns};
      }
    }
    if (op.kind == GpuOpKind::kMemset) {
      ++out.memsets;
      continue;
    }
    CopyDirectionStats& d = out.directions[static_cast<int>(op.direction)];
    ++d.count;
    d.bytes += op.bytes;
    d.busy_ns += op.end_ns - op.start_ns;
    if (op.pageable && call != nullptr && call->kind == ApiKind::kMemcpyAsync) {
      ++out.pageable_async_copies;
      out.pageable_async_bytes += op.bytes;
      out.pageable_async_ns += op.end_ns - op.start_ns;
      if (op.end_ns - op.start_ns >
          out.longest_pageable_async.end_ns - out.longest_pageable_async.start_ns) {
        out.longest_pageable_async = {op.start_ns, op.end_ns};
      }
    }
  }
  return out;
}

namespace {

// A stall: host time in a synchronize call, on thread (pid, tid) when known.
struct Stall {
  int64_t start_ns = 0, end_ns = 0;
  uint32_t name = 0;
  bool has_thread = false;
  int64_t pid = 0, tid = 0;
};

// `named` largest first (ties by name), at most `limit`.
std::vector<NamedTime> Largest(const absl::flat_hash_map<int64_t, NamedTime>& named, size_t limit) {
  std::vector<NamedTime> out;
  out.reserve(named.size());
  for (const auto& [key, n] : named) out.push_back(n);
  std::sort(out.begin(), out.end(), [](const NamedTime& x, const NamedTime& y) {
    return x.ns != y.ns ? x.ns > y.ns : x.name < y.name;
  });
  if (out.size() > limit) out.resize(limit);
  return out;
}

// The synchronize calls; without runtime calls in the trace, the
// host-blocking synchronization records (all but "Stream Wait Event", which
// makes a stream wait, not the host).
std::vector<Stall> Stalls(const TraceModel& model) {
  std::vector<Stall> stalls;
  for (const ApiCall& call : model.api_calls) {
    if (call.kind == ApiKind::kSynchronize) {
      stalls.push_back(Stall{call.start_ns, call.end_ns, call.name, true, call.pid, call.tid});
    }
  }
  if (!stalls.empty() || !model.api_calls.empty()) return stalls;
  for (const SyncRecord& sync : model.syncs) {
    if (model.Name(sync.name) != "Stream Wait Event") {
      stalls.push_back(Stall{sync.start_ns, sync.end_ns, sync.name});
    }
  }
  return stalls;
}

}  // namespace

SyncStats ComputeSyncStats(const TraceModel& model, const ModelIndex& index,
                           const Breakdown& breakdown) {
  SyncStats out;
  out.per_step_ns.assign(breakdown.steps.size(), 0);
  absl::flat_hash_map<int64_t, NamedTime> sites;  // range name index or -1
  absl::flat_hash_map<int64_t, NamedTime> calls;  // the stall's name index
  const std::vector<StepTimes>& steps = breakdown.steps;
  for (const Stall& stall : Stalls(model)) {
    const int64_t ns = stall.end_ns - stall.start_ns;
    ++out.calls;
    out.host_ns += ns;
    if (ns > out.longest.end_ns - out.longest.start_ns)
      out.longest = {stall.start_ns, stall.end_ns};
    NamedTime& call = calls[stall.name];
    if (call.name.empty()) call.name = model.Name(stall.name);
    call.ns += ns;
    ++call.count;
    auto step = std::partition_point(steps.begin(), steps.end(), [&](const StepTimes& s) {
      return s.start_ns <= stall.start_ns;
    });
    if (step != steps.begin() && stall.start_ns < (step - 1)->end_ns) {
      out.per_step_ns[static_cast<size_t>(step - 1 - steps.begin())] += ns;
    }
    const HostRange* range =
        stall.has_thread ? index.Innermost(stall.pid, stall.tid, stall.start_ns, stall.end_ns)
                         : nullptr;
    NamedTime& site = sites[range == nullptr ? -1 : int64_t{range->name}];
    if (site.name.empty()) site.name = range == nullptr ? "(no range)" : model.Name(range->name);
    site.ns += ns;
    ++site.count;
  }
  out.call_sites = Largest(sites, 5);
  out.by_call = Largest(calls, kTopOps);
  return out;
}

}  // namespace gpuctl::analysis
