#include "daemon/hostctx/window_events.h"

#include <algorithm>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/hostctx/host_trace_json.h"

namespace gpuctl::hostctx {

// The frames named at construction, looked up without changing anything
// (so concurrent Writes are safe); an address not seen stays an address.
class WindowEvents::Frames final : public FrameSymbolizer {
 public:
  Frames(const absl::flat_hash_map<FrameKey, Frame>* frames, const SpaceStarts* spaces)
      : frames_(frames), spaces_(spaces) {}
  uint32_t AddressSpaceAt(pid_t pid, uint64_t time_ns) override {
    auto it = spaces_->find(pid);
    if (it == spaces_->end()) return 0;
    // The last space whose first sample is not after `time_ns`.
    auto after = std::upper_bound(it->second.begin(), it->second.end(), time_ns,
                                  [](uint64_t time, const std::pair<uint64_t, uint32_t>& start) {
                                    return time < start.first;
                                  });
    return after == it->second.begin() ? 0 : std::prev(after)->second;
  }
  Frame Symbolize(pid_t pid, uint32_t space, uint64_t address, bool is_return_address) override {
    auto it =
        frames_->find(FrameKey{static_cast<uint32_t>(pid), space, address, is_return_address});
    return it == frames_->end() ? Frame{} : it->second;
  }

 private:
  const absl::flat_hash_map<FrameKey, Frame>* frames_;
  const SpaceStarts* spaces_;
};

WindowEvents::WindowEvents(HostCapture capture, FrameSymbolizer* symbolizer, bool samples,
                           bool switches, absl::flat_hash_map<pid_t, pid_t> own_tids)
    : capture_(std::move(capture)), own_tids_(std::move(own_tids)) {
  if (!samples) capture_.samples.clear();
  if (!switches) capture_.switch_stacks.clear();
  for (CpuSample& sample : capture_.samples) AddFrames(sample, symbolizer);
  for (CpuSample& stack : capture_.switch_stacks) AddFrames(stack, symbolizer);
  for (const auto& entry : space_samples_) {
    spaces_[entry.first.first].emplace_back(entry.second, entry.first.second);
  }
  space_samples_.clear();
  for (auto& entry : spaces_) std::sort(entry.second.begin(), entry.second.end());
  if (switches) off_cpu_ = OffCpuIntervals(capture_);
}

void WindowEvents::AddFrames(CpuSample& sample, FrameSymbolizer* symbolizer) {
  // A stack copy (DWARF unwinding) becomes its chain now, while the
  // process's modules are at hand, and is freed.
  if (!sample.user_stack.empty()) {
    std::vector<uint64_t> chain = BestCallChain(sample, symbolizer);
    if (!sample.at_switch) {
      dwarf_ = true;
      if (chain.size() > sample.ips.size()) ++dwarf_unwound_;
    }
    sample.ips = std::move(chain);
    sample.user_stack = {};
    sample.user_regs = {};
  }
  const auto pid = static_cast<pid_t>(sample.pid);
  const uint32_t space = symbolizer->AddressSpaceAt(pid, sample.time_ns);
  if (space > 0) {
    // The spaces follow each other in time: the earliest sample of each
    // tells the spaces of the samples apart as well as its start would.
    auto [first, inserted] = space_samples_.try_emplace(std::make_pair(pid, space), sample.time_ns);
    if (!inserted) first->second = std::min(first->second, sample.time_ns);
  }
  for (size_t i = 0; i < sample.ips.size(); ++i) {
    const FrameKey key{sample.pid, space, sample.ips[i], i > 0};
    if (frames_.contains(key)) continue;
    frames_.emplace(key, symbolizer->Symbolize(pid, space, sample.ips[i], i > 0));
  }
}

WindowEvents::Written WindowEvents::Write(int64_t base_time_ns, int64_t window_start_ns,
                                          int64_t window_end_ns,
                                          absl::FunctionRef<void(absl::string_view)> sink) const {
  const uint64_t start = static_cast<uint64_t>(std::max<int64_t>(window_start_ns, 0));
  const uint64_t end = static_cast<uint64_t>(std::max<int64_t>(window_end_ns, 0));
  HostCapture view;
  view.roots = capture_.roots;
  view.threads = capture_.threads;
  view.switch_stacks = capture_.switch_stacks;  // the intervals' `stack` indices
  view.preemptor_names = capture_.preemptor_names;
  for (const CpuSample& sample : capture_.samples) {
    if (sample.time_ns >= start && sample.time_ns <= end) view.samples.push_back(sample);
  }
  std::vector<OffCpuInterval> intervals;
  for (OffCpuInterval interval : off_cpu_) {
    interval.start_ns = std::max(interval.start_ns, start);
    interval.end_ns = std::min(interval.end_ns, end);
    if (interval.end_ns > interval.start_ns) intervals.push_back(interval);
  }
  if (!own_tids_.empty()) {
    auto own = [this](uint32_t tid) -> uint32_t {
      auto it = own_tids_.find(static_cast<pid_t>(tid));
      return it == own_tids_.end() ? tid : static_cast<uint32_t>(it->second);
    };
    for (SampledThread& thread : view.threads) {
      thread.tid = static_cast<pid_t>(own(static_cast<uint32_t>(thread.tid)));
    }
    for (CpuSample& sample : view.samples) sample.tid = own(sample.tid);
    for (OffCpuInterval& interval : intervals) interval.tid = own(interval.tid);
  }
  Frames frames(&frames_, &spaces_);
  WriteHostContextEvents(view, intervals, &frames, static_cast<uint64_t>(base_time_ns), sink);
  return {.samples = view.samples.size(), .off_cpu_intervals = intervals.size()};
}

v1::HostContextResult WindowEvents::Summary() const {
  v1::HostContextResult summary;
  summary.set_state(v1::HostContextResult::STATE_RECORDED);
  summary.set_switches(capture_.switches.size());
  summary.set_threads(static_cast<uint32_t>(capture_.threads.size()));
  absl::flat_hash_set<pid_t> processes;
  for (const SampledThread& thread : capture_.threads) processes.insert(thread.pid);
  summary.set_processes(static_cast<uint32_t>(processes.size()));
  summary.set_lost_records(capture_.lost_records);
  summary.set_dropped_samples(capture_.dropped_samples);
  summary.set_dropped_switches(capture_.dropped_switches);
  summary.set_thread_errors(static_cast<uint32_t>(capture_.error_count));
  if (dwarf_ || capture_.stacks_dropped > 0) {
    summary.set_unwind(v1::HOST_UNWIND_DWARF);
    summary.set_dwarf_unwound(dwarf_unwound_);
    summary.set_stacks_dropped(capture_.stacks_dropped);
  }
  if (!capture_.errors.empty()) {
    summary.set_reason(absl::StrCat(capture_.error_count, " thread(s) not sampled: ",
                                    capture_.errors.front().status.message()));
  } else {
    std::vector<std::string> missing;
    if (capture_.switch_stack_errors > 0) {
      missing.push_back(absl::StrCat(
          capture_.switch_stack_errors,
          " thread(s) without call chains at switch-out: ", capture_.switch_stack_error.message()));
    }
    if (!capture_.cpu_wide_error.ok()) {
      missing.push_back(
          absl::StrCat("preempting processes not named: ", capture_.cpu_wide_error.message()));
    }
    if (!missing.empty()) summary.set_reason(absl::StrJoin(missing, "; "));
  }
  return summary;
}

absl::flat_hash_map<pid_t, pid_t> NamespaceThreadIds(const std::string& proc_root,
                                                     const HostCapture& capture) {
  absl::flat_hash_map<pid_t, pid_t> out;
  const absl::flat_hash_set<pid_t> roots(capture.roots.begin(), capture.roots.end());
  for (const SampledThread& thread : capture.threads) {
    if (!roots.contains(thread.pid)) continue;
    std::ifstream status(absl::StrCat(proc_root, "/", thread.pid, "/task/", thread.tid, "/status"));
    std::string line;
    while (std::getline(status, line)) {
      absl::string_view rest = line;
      if (!absl::ConsumePrefix(&rest, "NSpid:")) continue;
      const std::vector<absl::string_view> fields =
          absl::StrSplit(rest, absl::ByAnyChar(" \t"), absl::SkipEmpty());
      pid_t own = 0;
      if (!fields.empty() && absl::SimpleAtoi(fields.back(), &own) && own > 0 &&
          own != thread.tid) {
        out[thread.tid] = own;
      }
      break;
    }
  }
  return out;
}

}  // namespace gpuctl::hostctx
