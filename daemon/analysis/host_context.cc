#include "daemon/analysis/host_context.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace gpuctl::analysis {
namespace {

using Interval = std::pair<int64_t, int64_t>;

// One thread's events: index ranges into the model's sorted host events.
struct ThreadEvents {
  int64_t pid = 0;
  size_t samples_begin = 0, samples_end = 0;
  size_t slices_begin = 0, slices_end = 0;
};

absl::flat_hash_map<int64_t, ThreadEvents> IndexThreads(const HostEvents& host) {
  absl::flat_hash_map<int64_t, ThreadEvents> out;
  for (size_t i = 0; i < host.samples.size();) {
    size_t end = i;
    while (end < host.samples.size() && host.samples[end].tid == host.samples[i].tid) ++end;
    ThreadEvents& t = out[host.samples[i].tid];
    t.pid = host.samples[i].pid;
    t.samples_begin = i;
    t.samples_end = end;
    i = end;
  }
  for (size_t i = 0; i < host.off_cpu.size();) {
    size_t end = i;
    while (end < host.off_cpu.size() && host.off_cpu[end].tid == host.off_cpu[i].tid) ++end;
    ThreadEvents& t = out[host.off_cpu[i].tid];
    t.pid = host.off_cpu[i].pid;
    t.slices_begin = i;
    t.slices_end = end;
    i = end;
  }
  return out;
}

// Accumulates a CpuAttribution: off-CPU time by site, samples by function.
class AttributionBuilder {
 public:
  explicit AttributionBuilder(const TraceModel* model) : model_(model) {}

  // [a, b) of the thread `t`: its off-CPU slices' overlap, its samples, the
  // rest on the CPU.
  void AddStretch(const ThreadEvents& t, int64_t a, int64_t b) {
    if (b <= a) return;
    out_.total_ns += b - a;
    int64_t off = 0;
    const std::vector<OffCpuSlice>& slices = model_->host.off_cpu;
    // A thread's slices do not overlap: sorted by start, so by end too.
    auto it = std::partition_point(slices.begin() + static_cast<ptrdiff_t>(t.slices_begin),
                                   slices.begin() + static_cast<ptrdiff_t>(t.slices_end),
                                   [a](const OffCpuSlice& s) { return s.end_ns <= a; });
    for (; it != slices.begin() + static_cast<ptrdiff_t>(t.slices_end) && it->start_ns < b; ++it) {
      const int64_t ns = std::min(b, it->end_ns) - std::max(a, it->start_ns);
      if (ns <= 0) continue;
      off += ns;
      AddOff(*it, ns);
    }
    out_.on_cpu_ns += (b - a) - off;
    const std::vector<CpuSampleEvent>& samples = model_->host.samples;
    auto s = std::partition_point(samples.begin() + static_cast<ptrdiff_t>(t.samples_begin),
                                  samples.begin() + static_cast<ptrdiff_t>(t.samples_end),
                                  [a](const CpuSampleEvent& e) { return e.ts_ns < a; });
    for (; s != samples.begin() + static_cast<ptrdiff_t>(t.samples_end) && s->ts_ns < b; ++s) {
      ++out_.samples;
      NamedTime& fn = on_cpu_[s->top];
      if (fn.name.empty()) fn.name = s->top == kNoName ? "[no frames]" : model_->Name(s->top);
      ++fn.count;
    }
  }

  CpuAttribution Finish() && {
    out_.blocked_in = Top(std::move(blocked_));
    out_.preempted_by = Top(std::move(preempted_));
    for (auto& [key, fn] : on_cpu_) {
      // The on-CPU time split by samples (exact: products stay within int64
      // for any window the reader accepts).
      fn.ns = out_.samples == 0 ? 0
                                : out_.on_cpu_ns * static_cast<int64_t>(fn.count) /
                                      static_cast<int64_t>(out_.samples);
    }
    out_.on_cpu = Top(std::move(on_cpu_));
    return std::move(out_);
  }

 private:
  void AddOff(const OffCpuSlice& s, int64_t ns) {
    NamedTime* site = nullptr;
    switch (s.kind) {
      case OffCpuKind::kBlocked: {
        out_.blocked_ns += ns;
        site = &blocked_[(uint64_t{s.top} << 32) | s.caller];
        if (site->name.empty()) site->name = SiteName(s);
        break;
      }
      case OffCpuKind::kPreempted:
        out_.preempted_ns += ns;
        site = &preempted_[s.preempted_by];
        if (site->name.empty()) {
          site->name = s.preempted_by == kNoName ? "(not named)" : model_->Name(s.preempted_by);
        }
        break;
      case OffCpuKind::kUnknown:
        out_.unknown_ns += ns;
        return;
    }
    site->ns += ns;
    ++site->count;
  }

  std::string SiteName(const OffCpuSlice& s) const {
    if (s.top == kNoName) return "(no stack)";
    if (s.caller == kNoName) return model_->Name(s.top);
    return absl::StrCat(model_->Name(s.top), " <- ", model_->Name(s.caller));
  }

  template <typename Key>
  static std::vector<NamedTime> Top(absl::flat_hash_map<Key, NamedTime> by_key) {
    std::vector<NamedTime> out;
    out.reserve(by_key.size());
    for (auto& [key, named] : by_key) out.push_back(std::move(named));
    std::sort(out.begin(), out.end(), [](const NamedTime& x, const NamedTime& y) {
      if (x.ns != y.ns) return x.ns > y.ns;
      if (x.count != y.count) return x.count > y.count;
      return x.name < y.name;
    });
    if (out.size() > kTopHostSites) out.resize(kTopHostSites);
    return out;
  }

  const TraceModel* model_;
  CpuAttribution out_;
  absl::flat_hash_map<uint64_t, NamedTime> blocked_;
  absl::flat_hash_map<uint32_t, NamedTime> preempted_, on_cpu_;
};

// The GPU-idle parts of [a, b) on a device (`idle`: sorted, disjoint).
std::vector<Interval> IdlePieces(const std::vector<Interval>& idle, int64_t a, int64_t b) {
  std::vector<Interval> out;
  auto it = std::partition_point(idle.begin(), idle.end(),
                                 [a](const Interval& s) { return s.second <= a; });
  for (; it != idle.end() && it->first < b; ++it) {
    out.emplace_back(std::max(a, it->first), std::min(b, it->second));
  }
  return out;
}

// The threads over the window (or their events' span without one).
std::vector<ThreadActivity> WindowThreads(const TraceModel& model,
                                          const absl::flat_hash_map<int64_t, ThreadEvents>& index,
                                          const absl::flat_hash_set<int64_t>& launching) {
  absl::flat_hash_map<int64_t, uint32_t> names;
  for (const TrackName& t : model.host.threads) names[t.tid] = t.name;
  std::vector<ThreadActivity> out;
  for (const auto& [tid, t] : index) {
    int64_t a = model.info.window_start_ns, b = model.info.window_end_ns;
    if (!model.info.has_window) {
      a = t.samples_end > t.samples_begin ? model.host.samples[t.samples_begin].ts_ns
                                          : std::numeric_limits<int64_t>::max();
      b = t.samples_end > t.samples_begin ? model.host.samples[t.samples_end - 1].ts_ns + 1
                                          : std::numeric_limits<int64_t>::min();
      if (t.slices_end > t.slices_begin) {
        a = std::min(a, model.host.off_cpu[t.slices_begin].start_ns);
        b = std::max(b, model.host.off_cpu[t.slices_end - 1].end_ns);
      }
    }
    AttributionBuilder builder(&model);
    builder.AddStretch(t, a, b);
    ThreadActivity activity{t.pid, tid, "", std::move(builder).Finish()};
    if (auto name = names.find(tid); name != names.end()) activity.name = model.Name(name->second);
    out.push_back(std::move(activity));
  }
  auto weight = [](const ThreadActivity& x) {
    return x.time.blocked_ns + x.time.preempted_ns + x.time.on_cpu_ns;
  };
  std::sort(out.begin(), out.end(), [&](const ThreadActivity& x, const ThreadActivity& y) {
    const bool lx = launching.contains(x.tid), ly = launching.contains(y.tid);
    if (lx != ly) return lx;
    if (weight(x) != weight(y)) return weight(x) > weight(y);
    return x.tid < y.tid;
  });
  if (out.size() > kMaxHostThreads) out.resize(kMaxHostThreads);
  return out;
}

}  // namespace

HostContext ComputeHostContext(const TraceModel& model, const Breakdown& breakdown,
                               const IdleGaps& gaps) {
  HostContext out;
  const HostEvents& host = model.host;
  out.present = !host.empty();
  if (!out.present) return out;
  out.samples = host.samples.size();
  out.off_cpu_slices = host.off_cpu.size();
  const absl::flat_hash_map<int64_t, ThreadEvents> index = IndexThreads(host);
  absl::flat_hash_map<int32_t, const std::vector<Interval>*> device_idle;
  for (const DeviceTimes& d : breakdown.devices) device_idle[d.device] = &d.idle;

  AttributionBuilder launching(&model), helpers(&model);
  absl::flat_hash_set<int64_t> launching_tids, helper_tids;
  for (const HostBoundGap& gap : gaps.host_bound) {
    auto thread = index.find(gap.tid);
    auto idle = device_idle.find(gap.device);
    if (thread == index.end() || idle == device_idle.end()) continue;
    ++out.gaps;
    launching_tids.insert(gap.tid);
    for (const Interval& piece : IdlePieces(*idle->second, gap.start_ns, gap.end_ns)) {
      launching.AddStretch(thread->second, piece.first, piece.second);
      for (const auto& [tid, t] : index) {
        if (t.pid == thread->second.pid) continue;
        helper_tids.insert(tid);
        helpers.AddStretch(t, piece.first, piece.second);
      }
    }
  }
  out.launching = std::move(launching).Finish();
  out.helpers = std::move(helpers).Finish();
  out.helper_threads = helper_tids.size();
  out.threads = WindowThreads(model, index, launching_tids);
  return out;
}

}  // namespace gpuctl::analysis
