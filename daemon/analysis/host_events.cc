#include "daemon/analysis/host_events.h"

#include <algorithm>
#include <tuple>

namespace gpuctl::analysis {
namespace {

// Names longer than this are cut: frames are symbols, not payloads.
constexpr size_t kMaxHostNameBytes = 512;

std::string Bounded(absl::string_view s) {
  return std::string(s.substr(0, std::min(s.size(), kMaxHostNameBytes)));
}

OffCpuKind KindOf(absl::string_view reason) {
  if (reason == "blocked") return OffCpuKind::kBlocked;
  if (reason == "preempted") return OffCpuKind::kPreempted;
  return OffCpuKind::kUnknown;
}

}  // namespace

void HostEventCollector::BeginEvent() {
  kind_ = Kind::kNone;
  key_ = Key::kOther;
  stack_frames_ = 0;
  top_.clear();
  caller_.clear();
  reason_.clear();
  preempted_by_.clear();
  arg_name_.clear();
}

void HostEventCollector::OnCategory(absl::string_view cat) {
  // Every event's category passes here: the length rules out most at once.
  if (cat.size() == 10 && cat == "cpu_sample") kind_ = Kind::kSample;
  if (cat.size() == 7 && cat == "off_cpu") kind_ = Kind::kOffCpu;
}

void HostEventCollector::OnArgKey(absl::string_view key) {
  // Every args member's key passes here: the length rules out most at once.
  switch (key.size()) {
    case 4:
      key_ = key == "name" ? Key::kName : Key::kOther;
      break;
    case 5:
      key_ = key == "stack" ? Key::kStack : Key::kOther;
      break;
    case 6:
      key_ = key == "reason" ? Key::kReason : Key::kOther;
      break;
    case 12:
      key_ = key == "preempted_by" ? Key::kPreemptedBy : Key::kOther;
      break;
    default:
      key_ = Key::kOther;
      break;
  }
}

void HostEventCollector::OnArgString(absl::string_view value, bool in_array) {
  if (in_array) {
    if (key_ != Key::kStack) return;
    if (stack_frames_ == 0) top_ = Bounded(value);
    if (stack_frames_ == 1) caller_ = Bounded(value);
    ++stack_frames_;
    return;
  }
  if (key_ == Key::kReason) reason_ = Bounded(value);
  if (key_ == Key::kPreemptedBy) preempted_by_ = Bounded(value);
  if (key_ == Key::kName) arg_name_ = Bounded(value);
}

bool HostEventCollector::EndEvent(char ph, absl::string_view name, bool has_ts, int64_t ts_ns,
                                  int64_t dur_ns, int64_t pid, int64_t tid, Intern intern,
                                  HostEvents* out, uint64_t* skipped) {
  if (ph == 'M') {
    if ((name != "thread_name" && name != "process_name") || arg_name_.empty()) return false;
    std::vector<TrackName>& names = name == "thread_name" ? out->threads : out->processes;
    names.push_back(TrackName{pid, name == "thread_name" ? tid : 0, intern(arg_name_)});
    return true;
  }
  auto name_or_none = [&](const std::string& s) { return s.empty() ? kNoName : intern(s); };
  if (kind_ == Kind::kSample && ph == 'i') {
    if (!has_ts) {
      ++*skipped;
      return true;
    }
    // A sample without frames is named "[no frames]" and has an empty stack.
    out->samples.push_back(CpuSampleEvent{ts_ns, pid, tid, name_or_none(top_)});
    return true;
  }
  if (kind_ == Kind::kOffCpu && ph == 'X') {
    if (!has_ts || dur_ns < 0) {
      ++*skipped;
      return true;
    }
    out->off_cpu.push_back(OffCpuSlice{ts_ns, ts_ns + dur_ns, pid, tid, name_or_none(top_),
                                       name_or_none(caller_), name_or_none(preempted_by_),
                                       KindOf(reason_)});
    return true;
  }
  return false;
}

void SortHostEvents(HostEvents* events) {
  std::sort(events->samples.begin(), events->samples.end(),
            [](const CpuSampleEvent& a, const CpuSampleEvent& b) {
              return std::tie(a.tid, a.ts_ns) < std::tie(b.tid, b.ts_ns);
            });
  std::sort(events->off_cpu.begin(), events->off_cpu.end(),
            [](const OffCpuSlice& a, const OffCpuSlice& b) {
              return std::tie(a.tid, a.start_ns, a.end_ns) < std::tie(b.tid, b.start_ns, b.end_ns);
            });
}

}  // namespace gpuctl::analysis
