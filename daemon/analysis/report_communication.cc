#include "daemon/analysis/report_communication.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/analysis/html_writer.h"
#include "daemon/analysis/units.h"

namespace gpuctl::analysis {
namespace {

// The compared reports by trace id, each group in rank order as the
// reports come (AnalyzeRanks' order).
std::map<std::string, std::vector<const TraceReport*>> ComparedGroups(
    const std::vector<TraceReport>& reports) {
  std::map<std::string, std::vector<const TraceReport*>> groups;
  for (const TraceReport& r : reports) {
    if (r.communication.across.ranks > 0) groups[r.info.trace_id].push_back(&r);
  }
  for (auto& [id, group] : groups) {
    std::sort(group.begin(), group.end(), [](const TraceReport* a, const TraceReport* b) {
      return a->info.rank < b->info.rank;
    });
  }
  return groups;
}

std::string StragglerVerdict(const RankCommunication& a) {
  if (a.step_straggler && a.arrival_straggler) return "step, arrival";
  if (a.step_straggler) return "step";
  if (a.arrival_straggler) return "arrival";
  return "-";
}

std::string GroupHeading(const std::string& trace_id, const TraceReport& first) {
  const RankCommunication& a = first.communication.across;
  return absl::StrCat(trace_id.empty() ? "" : absl::StrCat("trace ", trace_id, ": "), a.ranks,
                      " ranks, ", a.matched, " collectives matched, arrival spread p50 ",
                      FormatNs(a.arrival_spread_ns.p50), " p99 ",
                      FormatNs(a.arrival_spread_ns.p99));
}

nlohmann::json PercentilesJson(const Percentiles& p) {
  return nlohmann::json{
      {"count", p.count}, {"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"max", p.max}};
}

}  // namespace

std::string RenderRanksText(const std::vector<TraceReport>& reports, size_t columns) {
  std::string out;
  for (const auto& [trace_id, group] : ComparedGroups(reports)) {
    std::string stats = GroupHeading("", *group.front());
    if (stats.size() > columns) stats = absl::StrCat(stats.substr(0, columns - 1), "~");
    absl::StrAppend(
        &out, "\nCOMMUNICATION ACROSS RANKS",
        trace_id.empty() ? "" : absl::StrCat(" (trace ", trace_id, ")"), "\n", stats, "\n",
        absl::StrFormat("%5s %9s %8s %9s %9s %9s %9s %9s  %s\n", "RANK", "NCCL", "OVERLAP",
                        "TRANSFER", "WAITING", "LATE p50", "STEP p50", "UNMATCHED", "STRAGGLER"));
    for (const TraceReport* r : group) {
      const CommunicationReport& c = r->communication;
      const RankCommunication& a = c.across;
      absl::StrAppend(
          &out, absl::StrFormat("%5d %9s %8s %9s %9s %9s %9s %9d  %s\n", r->info.rank,
                                FormatNs(c.nccl_ns), FormatShare(c.overlapped_ns, c.nccl_ns),
                                FormatNs(a.transfer_ns), FormatNs(a.waiting_ns),
                                FormatNs(a.lateness_ns.p50),
                                r->step_ns.count > 0 ? FormatNs(r->step_ns.p50) : "-", a.unmatched,
                                StragglerVerdict(a)));
    }
  }
  return out;
}

void AppendHtmlRanks(std::string* out, const std::vector<TraceReport>& reports) {
  const auto groups = ComparedGroups(reports);
  if (groups.empty()) return;
  absl::StrAppend(out,
                  "<section id=\"ranks\"><h2>Communication across ranks</h2>\n<p class=\"note\">"
                  "The i-th NCCL kernel of a name on each rank is one collective: its shortest "
                  "duration across ranks is transfer, the rest waiting for the slowest rank; "
                  "lateness is a rank's start after the first rank's (hosts' clocks must "
                  "agree).</p>\n");
  for (const auto& [trace_id, group] : groups) {
    absl::StrAppend(out, "<h3>", html::Escape(GroupHeading(trace_id, *group.front())),
                    "</h3>\n<div class=\"scroll\"><table class=\"ranks\"><thead><tr><th>rank</th>"
                    "<th>NCCL</th><th>overlapped</th><th>transfer</th><th>waiting</th>"
                    "<th>late p50</th><th>step p50</th><th>unmatched</th><th>straggler</th>"
                    "</tr></thead><tbody>\n");
    for (const TraceReport* r : group) {
      const CommunicationReport& c = r->communication;
      const RankCommunication& a = c.across;
      auto ns = [](const char* cls, int64_t v) {
        return absl::StrCat("<td class=\"", cls, "\" data-ns=\"", v, "\">", FormatNs(v), "</td>");
      };
      absl::StrAppend(
          out, "<tr class=\"rank-row\" data-rank=\"", r->info.rank, "\" data-file=\"",
          html::Escape(r->info.path), "\"><td>", r->info.rank, "</td>", ns("nccl", c.nccl_ns),
          "<td>", FormatShare(c.overlapped_ns, c.nccl_ns), "</td>", ns("transfer", a.transfer_ns),
          ns("waiting", a.waiting_ns), ns("late", a.lateness_ns.p50),
          r->step_ns.count > 0 ? ns("step", r->step_ns.p50) : "<td>-</td>", "<td>", a.unmatched,
          "</td><td class=\"straggler\">", StragglerVerdict(a), "</td></tr>\n");
    }
    absl::StrAppend(out, "</tbody></table></div>\n");
  }
  absl::StrAppend(out, "</section>\n");
}

nlohmann::json CommunicationJson(const CommunicationReport& c) {
  nlohmann::json out{{"kernels", c.kernels},
                     {"nccl_ns", c.nccl_ns},
                     {"overlapped_ns", c.overlapped_ns},
                     {"step_ns", c.step_ns},
                     {"step_exposed_ns", c.step_exposed_ns},
                     {"across_ranks", nullptr}};
  const RankCommunication& a = c.across;
  if (a.ranks == 0) return out;
  out["across_ranks"] = nlohmann::json{{"ranks", a.ranks},
                                       {"matched", a.matched},
                                       {"unmatched", a.unmatched},
                                       {"transfer_ns", a.transfer_ns},
                                       {"waiting_ns", a.waiting_ns},
                                       {"lateness_ns", PercentilesJson(a.lateness_ns)},
                                       {"arrival_spread_ns", PercentilesJson(a.arrival_spread_ns)},
                                       {"step_median_ns", a.step_median_ns},
                                       {"step_mad_ns", a.step_mad_ns},
                                       {"lateness_median_ns", a.lateness_median_ns},
                                       {"lateness_mad_ns", a.lateness_mad_ns},
                                       {"step_straggler", a.step_straggler},
                                       {"arrival_straggler", a.arrival_straggler}};
  return out;
}

}  // namespace gpuctl::analysis
