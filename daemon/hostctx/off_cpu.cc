#include "daemon/hostctx/off_cpu.h"

#include <algorithm>
#include <tuple>

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
    if (end > start) out.push_back(OffCpuInterval{at.pid, at.tid, start, end, reason});
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

}  // namespace gpuctl::hostctx
