#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "daemon/analysis/host_context.h"
#include "daemon/analysis/units.h"

namespace gpuctl::analysis {
namespace {

// Helper processes preempted for at least this share of their time in the
// gaps are named in the finding.
constexpr double kHelperPreemptedShare = 0.1;

double HostContextNumber(int64_t v) { return static_cast<double>(v); }

std::string MostlyBy(const std::vector<NamedTime>& by) {
  if (by.empty() || by.front().name == "(not named)") return "";
  return absl::StrCat(", mostly by ", by.front().name, " (", FormatNs(by.front().ns), ")");
}

// The title's cause and the advice for the largest of blocked, preempted
// and on-CPU time; its time is what removing the cause could give back.
struct Cause {
  int64_t ns = 0;
  std::string what, advice;
};

Cause DominantCause(const CpuAttribution& t) {
  Cause blocked{t.blocked_ns, "", ""};
  const std::string site = t.blocked_in.empty() ? "(no stack)" : t.blocked_in.front().name;
  blocked.what =
      absl::StrCat("was off-CPU blocked in `", absl::StrReplaceAll(site, {{" <- ", "` <- `"}}),
                   "` (", FormatNs(t.blocked_ns), ")");
  blocked.advice =
      "Move the blocking call off the launching thread (DataLoader workers, prefetching, "
      "pinned memory, asynchronous I/O) or overlap it with GPU work";
  Cause preempted{t.preempted_ns, "", ""};
  preempted.what =
      absl::StrCat("was preempted (", FormatNs(t.preempted_ns), ")", MostlyBy(t.preempted_by));
  preempted.advice =
      "Give the training process CPUs of its own (taskset, cgroup cpusets) or run fewer "
      "threads than cores beside it";
  Cause running{t.on_cpu_ns, "", ""};
  const std::string fn = t.on_cpu.empty() ? "" : t.on_cpu.front().name;
  running.what = absl::StrCat("ran on the CPU (", FormatNs(t.on_cpu_ns), ")",
                              fn.empty() ? "" : absl::StrCat(", mostly in `", fn, "`"));
  running.advice =
      "Move that work off the launching thread (DataLoader workers, torch.compile) or "
      "overlap it with GPU work";
  Cause best = std::move(blocked);
  if (preempted.ns > best.ns) best = std::move(preempted);
  if (running.ns > best.ns) best = std::move(running);
  return best;
}

void AddNamed(const std::vector<NamedTime>& named, absl::string_view prefix,
              std::vector<std::pair<std::string, double>>* numbers) {
  for (const NamedTime& n : named) {
    numbers->emplace_back(absl::StrCat(prefix, n.name, "_ns"), HostContextNumber(n.ns));
  }
}

}  // namespace

std::vector<Finding> HostContextFindings(const TraceModel& model, const Breakdown& breakdown,
                                         const IdleGaps& gaps, const HostContext& host,
                                         const AnalyzeOptions& options) {
  std::vector<Finding> out;
  const CpuAttribution& t = host.launching;
  const int64_t span = breakdown.process.span_ns();
  if (host.gaps == 0 || t.total_ns <= 0 ||
      static_cast<double>(t.total_ns) < options.min_share * static_cast<double>(span)) {
    return out;
  }
  const Cause cause = DominantCause(t);
  if (cause.ns <= 0) return out;
  Finding f;
  f.id = "host_bound_cpu";
  f.trace = model.info.path;
  f.rank = model.info.rank;
  f.recoverable_ns = cause.ns;
  f.at = gaps.classes[static_cast<int>(GapClass::kHostBound)].largest;
  f.title =
      absl::StrCat("GPU idle ", FormatNs(t.total_ns), " while the launching thread ", cause.what);
  f.advice =
      absl::StrCat(cause.advice, "; of the idle time ", FormatShare(t.blocked_ns, t.total_ns),
                   " blocked, ", FormatShare(t.preempted_ns, t.total_ns), " preempted, ",
                   FormatShare(t.on_cpu_ns, t.total_ns), " on the CPU");
  const CpuAttribution& h = host.helpers;
  if (h.total_ns > 0 && static_cast<double>(h.preempted_ns) >=
                            kHelperPreemptedShare * static_cast<double>(h.total_ns)) {
    absl::StrAppend(&f.advice, "; helper processes were preempted ", FormatNs(h.preempted_ns), " (",
                    FormatShare(h.preempted_ns, h.total_ns), " of their time)",
                    MostlyBy(h.preempted_by));
  }
  f.numbers = {{"gpu_idle_ns", HostContextNumber(t.total_ns)},
               {"blocked_ns", HostContextNumber(t.blocked_ns)},
               {"preempted_ns", HostContextNumber(t.preempted_ns)},
               {"on_cpu_ns", HostContextNumber(t.on_cpu_ns)},
               {"unknown_ns", HostContextNumber(t.unknown_ns)},
               {"gaps", static_cast<double>(host.gaps)},
               {"helper_thread_ns", HostContextNumber(h.total_ns)},
               {"helper_preempted_ns", HostContextNumber(h.preempted_ns)}};
  AddNamed(t.blocked_in, "blocked_in:", &f.numbers);
  AddNamed(t.preempted_by, "preempted_by:", &f.numbers);
  AddNamed(t.on_cpu, "on_cpu:", &f.numbers);
  out.push_back(std::move(f));
  return out;
}

}  // namespace gpuctl::analysis
