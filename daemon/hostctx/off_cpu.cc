#include "daemon/hostctx/off_cpu.h"

#include <algorithm>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace gpuctl::hostctx {

absl::string_view OffCpuReasonName(OffCpuReason reason) {
  switch (reason) {
    case OffCpuReason::kBlocked:
      return "blocked";
    case OffCpuReason::kPreempted:
      return "preempted";
    case OffCpuReason::kUnknown:
      return "unknown";
  }
  return "unknown";
}

std::vector<OffCpuInterval> OffCpuIntervals(absl::Span<const ContextSwitch> switches,
                                            uint64_t window_start_ns, uint64_t window_end_ns) {
  std::vector<ContextSwitch> sorted(switches.begin(), switches.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const ContextSwitch& a, const ContextSwitch& b) {
                     return std::tie(a.tid, a.time_ns) < std::tie(b.tid, b.time_ns);
                   });
  std::vector<OffCpuInterval> out;
  auto emit = [&](const ContextSwitch& at, uint64_t start, uint64_t end, OffCpuReason reason) {
    start = std::max(start, window_start_ns);
    end = std::min(end, window_end_ns);
    if (end > start) out.push_back(OffCpuInterval{at.pid, at.tid, start, end, reason, -1, 0});
  };
  for (size_t i = 0; i < sorted.size();) {
    size_t end = i;
    while (end < sorted.size() && sorted[end].tid == sorted[i].tid) ++end;
    const ContextSwitch* pending_out = nullptr;
    for (size_t k = i; k < end; ++k) {
      const ContextSwitch& sw = sorted[k];
      if (sw.out) {
        if (pending_out == nullptr) pending_out = &sw;
        continue;
      }
      if (pending_out != nullptr) {
        emit(sw, pending_out->time_ns, sw.time_ns,
             pending_out->preempted ? OffCpuReason::kPreempted : OffCpuReason::kBlocked);
        pending_out = nullptr;
      } else if (k == i) {
        emit(sw, window_start_ns, sw.time_ns, OffCpuReason::kUnknown);
      }
    }
    if (pending_out != nullptr) {
      emit(*pending_out, pending_out->time_ns, window_end_ns,
           pending_out->preempted ? OffCpuReason::kPreempted : OffCpuReason::kBlocked);
    }
    i = end;
  }
  return out;
}

namespace {

// The index of the record of `items` (each with a tid and a time_ns) of
// thread `tid` nearest `at`, within kSwitchStackSlackNs; -1 when none.
// `order`: the indices sorted by (tid, time).
template <typename T>
int64_t NearestOfThread(absl::Span<const T> items, const std::vector<int64_t>& order, uint32_t tid,
                        uint64_t at) {
  auto it = std::lower_bound(order.begin(), order.end(), std::make_tuple(tid, at),
                             [&](int64_t i, const std::tuple<uint32_t, uint64_t>& k) {
                               return std::make_tuple(items[i].tid, items[i].time_ns) < k;
                             });
  int64_t best = -1;
  uint64_t best_distance = kSwitchStackSlackNs + 1;
  for (auto c : {it, it == order.begin() ? order.end() : it - 1}) {
    if (c == order.end() || items[*c].tid != tid) continue;
    const uint64_t t = items[*c].time_ns;
    const uint64_t distance = t > at ? t - at : at - t;
    if (distance < best_distance) {
      best_distance = distance;
      best = *c;
    }
  }
  return best;
}

template <typename T>
std::vector<int64_t> ByThreadAndTime(absl::Span<const T> items) {
  std::vector<int64_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return std::tie(items[a].tid, items[a].time_ns) < std::tie(items[b].tid, items[b].time_ns);
  });
  return order;
}

// Sets each blocked or preempted interval's `stack` to the switch-out
// sample of its thread nearest its start, and each preempted one's
// `preempted_by` to the task a CPU-wide event saw take its CPU then.
void PairSwitchOuts(const HostCapture& capture, std::vector<OffCpuInterval>* out) {
  const absl::Span<const CpuSample> stacks(capture.switch_stacks);
  const absl::Span<const CpuSwitch> preemptions(capture.preemptions);
  const std::vector<int64_t> stack_order = ByThreadAndTime(stacks);
  const std::vector<int64_t> preemption_order = ByThreadAndTime(preemptions);
  for (OffCpuInterval& interval : *out) {
    if (interval.reason == OffCpuReason::kUnknown) continue;
    interval.stack = NearestOfThread(stacks, stack_order, interval.tid, interval.start_ns);
    if (interval.reason != OffCpuReason::kPreempted) continue;
    const int64_t by =
        NearestOfThread(preemptions, preemption_order, interval.tid, interval.start_ns);
    if (by >= 0) interval.preempted_by = preemptions[static_cast<size_t>(by)].next_prev_pid;
  }
}

}  // namespace

std::vector<OffCpuInterval> OffCpuIntervals(const HostCapture& capture) {
  std::vector<OffCpuInterval> out =
      OffCpuIntervals(capture.switches, capture.start_ns, capture.stop_ns);
  absl::flat_hash_map<uint32_t, uint64_t> opened;
  for (const SampledThread& thread : capture.threads) {
    opened[static_cast<uint32_t>(thread.tid)] = thread.opened_ns;
  }
  std::vector<OffCpuInterval> clipped;
  clipped.reserve(out.size());
  for (OffCpuInterval& interval : out) {
    if (interval.reason == OffCpuReason::kUnknown) {
      if (auto it = opened.find(interval.tid); it != opened.end()) {
        interval.start_ns = std::max(interval.start_ns, it->second);
      }
      if (interval.start_ns >= interval.end_ns) continue;
    }
    clipped.push_back(interval);
  }
  absl::flat_hash_set<uint32_t> active;
  for (const ContextSwitch& sw : capture.switches) active.insert(sw.tid);
  for (const CpuSample& sample : capture.samples) active.insert(sample.tid);
  for (const SampledThread& thread : capture.threads) {
    const uint64_t start = std::max(thread.opened_ns, capture.start_ns);
    if (active.contains(static_cast<uint32_t>(thread.tid)) || start >= capture.stop_ns) continue;
    clipped.push_back(OffCpuInterval{static_cast<uint32_t>(thread.pid),
                                     static_cast<uint32_t>(thread.tid), start, capture.stop_ns,
                                     OffCpuReason::kUnknown, -1, 0});
  }
  PairSwitchOuts(capture, &clipped);
  return clipped;
}

}  // namespace gpuctl::hostctx
