#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/analysis/analyze.h"
#include "daemon/analysis/communication.h"
#include "daemon/analysis/units.h"

namespace gpuctl::analysis {
namespace {

double AsNumber(int64_t v) { return static_cast<double>(v); }

Finding RankFinding(const TraceReport& r, absl::string_view id, int64_t recoverable_ns) {
  Finding f;
  f.id = std::string(id);
  f.trace = r.info.path;
  f.rank = r.info.rank;
  f.recoverable_ns = recoverable_ns;
  // The rank's own data-quality findings qualify what its times say.
  f.low_confidence = std::any_of(r.findings.begin(), r.findings.end(), [](const Finding& q) {
    return q.data_quality && q.low_confidence;
  });
  return f;
}

bool WorthReporting(const TraceReport& r, int64_t ns, const AnalyzeOptions& options) {
  return ns > 0 && static_cast<double>(ns) >=
                       options.min_share * static_cast<double>(r.breakdown.process.span_ns());
}

// The rank that arrives last in the median (the first of equals).
const TraceReport* LatestArrival(const std::vector<TraceReport*>& group) {
  const TraceReport* latest = nullptr;
  for (const TraceReport* r : group) {
    const RankCommunication& a = r->communication.across;
    if (a.matched == 0) continue;
    if (latest == nullptr || a.lateness_ns.p50 > latest->communication.across.lateness_ns.p50) {
      latest = r;
    }
  }
  return latest;
}

void AddWaitingFinding(const std::vector<TraceReport*>& group, const AnalyzeOptions& options) {
  TraceReport* most = nullptr;
  for (TraceReport* r : group) {
    if (most == nullptr ||
        r->communication.across.waiting_ns > most->communication.across.waiting_ns) {
      most = r;
    }
  }
  const RankCommunication& a = most->communication.across;
  const int64_t nccl = a.transfer_ns + a.waiting_ns;
  if (nccl <= 0 || SharePct(a.waiting_ns, nccl) < 100 * options.comm_wait_share ||
      !WorthReporting(*most, a.waiting_ns, options)) {
    return;
  }
  const TraceReport* late = LatestArrival(group);
  Finding f = RankFinding(*most, "communication_waiting", a.waiting_ns);
  f.title = absl::StrCat("NCCL kernels waited ", FormatNs(a.waiting_ns), " for slower ranks, ",
                         FormatShare(a.waiting_ns, nccl), " of their ", FormatNs(nccl), " in ",
                         a.matched, " collectives (transfer ", FormatNs(a.transfer_ns), ")");
  f.advice = absl::StrCat(
      "Waiting is not bandwidth: rank ", late->info.rank, " arrives last (median ",
      FormatNs(late->communication.across.lateness_ns.p50),
      " after the first); even out the work before the collectives before tuning NCCL");
  f.numbers = {{"waiting_ns", AsNumber(a.waiting_ns)},
               {"transfer_ns", AsNumber(a.transfer_ns)},
               {"collectives", static_cast<double>(a.matched)},
               {"arrival_spread_p50_ns", AsNumber(a.arrival_spread_ns.p50)},
               {"latest_rank", static_cast<double>(late->info.rank)}};
  most->findings.push_back(std::move(f));
}

void AddStepStraggler(TraceReport& r, const AnalyzeOptions& options) {
  const RankCommunication& a = r.communication.across;
  const int64_t excess = r.step_ns.p50 - a.step_median_ns;
  const int64_t recoverable = excess * static_cast<int64_t>(r.step_ns.count);
  if (!a.step_straggler || !WorthReporting(r, recoverable, options)) return;
  Finding f = RankFinding(r, "straggler_step", recoverable);
  f.title =
      absl::StrCat("Median step ", FormatNs(r.step_ns.p50), ", ", FormatNs(excess), " (",
                   FormatShare(excess, a.step_median_ns), ") over the ", a.ranks, " ranks' median ",
                   FormatNs(a.step_median_ns), " (MAD ", FormatNs(a.step_mad_ns), ")");
  f.advice = absl::StrCat(
      "The other ranks wait for this one at every collective, ", FormatNs(excess),
      " a step: check its host (data loading, CPU contention, a throttled GPU) and its step "
      "breakdown against a fast rank's");
  f.numbers = {{"step_p50_ns", AsNumber(r.step_ns.p50)},
               {"ranks_step_median_ns", AsNumber(a.step_median_ns)},
               {"ranks_step_mad_ns", AsNumber(a.step_mad_ns)},
               {"excess_per_step_ns", AsNumber(excess)},
               {"steps", static_cast<double>(r.step_ns.count)}};
  r.findings.push_back(std::move(f));
}

void AddArrivalStraggler(TraceReport& r, const AnalyzeOptions& options) {
  const RankCommunication& a = r.communication.across;
  const int64_t excess = a.lateness_ns.p50 - a.lateness_median_ns;
  const int64_t recoverable = excess * static_cast<int64_t>(a.matched);
  if (!a.arrival_straggler || !WorthReporting(r, recoverable, options)) return;
  Finding f = RankFinding(r, "straggler_arrival", recoverable);
  f.title = absl::StrCat("Arrives at collectives a median ", FormatNs(a.lateness_ns.p50),
                         " after the first rank, against ", FormatNs(a.lateness_median_ns),
                         " for the ", a.ranks, " ranks' median (MAD ", FormatNs(a.lateness_mad_ns),
                         "), over ", a.matched, " collectives");
  f.advice = absl::StrCat(
      "The other ranks' NCCL kernels wait ", FormatNs(excess),
      " a collective for it: the work before its collectives takes longer (compare its "
      "breakdown); arrival times assume the hosts' clocks agree (NTP/PTP)");
  f.numbers = {{"lateness_p50_ns", AsNumber(a.lateness_ns.p50)},
               {"ranks_lateness_median_ns", AsNumber(a.lateness_median_ns)},
               {"ranks_lateness_mad_ns", AsNumber(a.lateness_mad_ns)},
               {"excess_per_collective_ns", AsNumber(excess)},
               {"collectives", static_cast<double>(a.matched)}};
  r.findings.push_back(std::move(f));
}

}  // namespace

void AppendCrossRankFindings(const std::vector<TraceReport*>& group,
                             const AnalyzeOptions& options) {
  if (group.empty()) return;
  if (group.front()->communication.across.matched > 0) AddWaitingFinding(group, options);
  for (TraceReport* r : group) {
    AddStepStraggler(*r, options);
    AddArrivalStraggler(*r, options);
  }
}

}  // namespace gpuctl::analysis
