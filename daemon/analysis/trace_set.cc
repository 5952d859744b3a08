#include "daemon/analysis/trace_set.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/analysis/units.h"
#include "nlohmann/json.hpp"

namespace gpuctl::analysis {
namespace {

using Json = nlohmann::json;

double Share(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0;
}

}  // namespace

double SetSummary::busy_share() const { return Share(busy_ns, gpu_span_ns); }
double SetSummary::idle_share() const { return Share(idle_ns, gpu_span_ns); }

SetSummary SummarizeSet(const std::vector<TraceReport>& reports) {
  SetSummary set;
  std::vector<int64_t> steps;
  std::map<std::string, OpTotals> kernels;
  for (const TraceReport& r : reports) {
    ++set.processes;
    const ClassTimes& p = r.breakdown.process;
    set.gpu_span_ns += p.span_ns();
    set.busy_ns += p.compute_ns + p.communication_ns + p.memory_ns;
    set.idle_ns += p.idle_ns;
    for (const StepTimes& s : r.breakdown.steps) {
      if (!s.clipped) steps.push_back(s.end_ns - s.start_ns);
    }
    for (const OpTotals& k : r.top.all_kernels) {
      OpTotals& t = kernels[k.name];
      t.name = k.name;
      t.count += k.count;
      t.total_ns += k.total_ns;
      t.max_ns = std::max(t.max_ns, k.max_ns);
      t.bytes += k.bytes;
    }
  }
  set.steps = ComputePercentiles(std::move(steps));
  for (auto& [name, totals] : kernels) set.kernels.push_back(std::move(totals));
  std::sort(set.kernels.begin(), set.kernels.end(), [](const OpTotals& a, const OpTotals& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  return set;
}

std::string RenderSetText(const SetSummary& set, size_t traces, size_t top, size_t columns) {
  std::string out = absl::StrCat("Across ", traces, traces == 1 ? " trace, " : " traces, ",
                                 set.processes, set.processes == 1 ? " process" : " processes");
  if (set.gpu_span_ns > 0) {
    absl::StrAppend(&out,
                    absl::StrFormat(": GPU busy %.1f%% (idle %.1f%%) of %s", 100 * set.busy_share(),
                                    100 * set.idle_share(), FormatNs(set.gpu_span_ns)));
  }
  absl::StrAppend(&out, "\n");
  if (set.steps.count > 0) {
    absl::StrAppend(&out, "  ", set.steps.count, " whole steps: p50 ", FormatNs(set.steps.p50),
                    ", p90 ", FormatNs(set.steps.p90), ", p99 ", FormatNs(set.steps.p99), ", max ",
                    FormatNs(set.steps.max), "\n");
  } else {
    absl::StrAppend(&out, "  no whole steps (ProfilerStep#N ranges)\n");
  }
  const size_t shown = std::min(top, set.kernels.size());
  if (shown == 0) return out;
  absl::StrAppend(&out, "  Top kernels by GPU time:\n");
  // "    12.3%  1.50 s  x12345  name": the number columns take 36.
  const size_t name_width = columns > 40 + 12 ? columns - 40 : 12;
  for (size_t i = 0; i < shown; ++i) {
    const OpTotals& k = set.kernels[i];
    std::string name = k.name;
    if (name.size() > name_width) name = absl::StrCat(name.substr(0, name_width - 1), "~");
    absl::StrAppend(
        &out, absl::StrFormat("    %6s  %9s  x%-9d  %s\n", FormatShare(k.total_ns, set.busy_ns),
                              FormatNs(k.total_ns), k.count, name));
  }
  return out;
}

std::string RenderSetJson(const SetSummary& set, size_t top) {
  Json kernels = Json::array();
  for (size_t i = 0; i < std::min(top, set.kernels.size()); ++i) {
    const OpTotals& k = set.kernels[i];
    kernels.push_back(
        {{"name", k.name}, {"count", k.count}, {"total_ns", k.total_ns}, {"max_ns", k.max_ns}});
  }
  Json doc = {{"processes", set.processes},
              {"gpu_span_ns", set.gpu_span_ns},
              {"busy_ns", set.busy_ns},
              {"idle_ns", set.idle_ns},
              {"busy_pct", 100 * set.busy_share()},
              {"idle_pct", 100 * set.idle_share()},
              {"steps",
               {{"count", set.steps.count},
                {"p50_ns", set.steps.p50},
                {"p90_ns", set.steps.p90},
                {"p99_ns", set.steps.p99},
                {"max_ns", set.steps.max}}},
              {"top_kernels", std::move(kernels)}};
  return doc.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace gpuctl::analysis
