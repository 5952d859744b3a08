#include "daemon/analysis/communication.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/analysis/analyze.h"

namespace gpuctl::analysis {
namespace {

// A process's collectives kept for the matching (the earliest ones): 2.4 MB
// per rank at most, so a job's worth of reports fits in memory.
constexpr size_t kMaxCollectives = 100'000;

// The lower median (nearest rank, as ComputePercentiles) of `values`.
int64_t LowerMedian(std::vector<int64_t> values) {
  if (values.empty()) return 0;
  const size_t mid = (values.size() - 1) / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  return values[mid];
}

int64_t MedianAbsoluteDeviation(const std::vector<int64_t>& values, int64_t median) {
  std::vector<int64_t> deviations;
  deviations.reserve(values.size());
  for (int64_t v : values) deviations.push_back(std::llabs(v - median));
  return LowerMedian(std::move(deviations));
}

// One rank's collectives of one name: [begin, end) of its sorted list.
struct NameRange {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};

// Per member of a group, per rank: what the matching accumulates.
struct MemberTotals {
  int64_t transfer_ns = 0, waiting_ns = 0;
  uint64_t matched = 0, unmatched = 0;
  std::vector<int64_t> lateness;
};

// Every name any member ran, with each member's range of it (empty when
// that member never ran it). Ordered by name so results do not depend on
// the files' order.
std::map<std::string, std::vector<NameRange>> RangesByName(
    const std::vector<const CommunicationReport*>& members) {
  std::map<std::string, std::vector<NameRange>> by_name;
  for (size_t m = 0; m < members.size(); ++m) {
    const std::vector<Collective>& list = members[m]->collectives;
    size_t i = 0;
    while (i < list.size()) {
      size_t j = i;
      while (j < list.size() && list[j].name == list[i].name) ++j;
      std::vector<NameRange>& ranges = by_name[members[m]->names[list[i].name]];
      ranges.resize(members.size());
      ranges[m] = NameRange{i, j};
      i = j;
    }
  }
  return by_name;
}

// The i-th collective of a name on every member is one collective: the
// shortest duration is its transfer, the rest of each member's is waiting,
// each start minus the earliest is that member's lateness.
std::vector<int64_t> MatchCollectives(const std::vector<const CommunicationReport*>& members,
                                      std::vector<MemberTotals>& totals) {
  std::vector<int64_t> spreads;
  for (const auto& [name, ranges] : RangesByName(members)) {
    size_t common = ranges[0].size();
    for (const NameRange& r : ranges) common = std::min(common, r.size());
    for (size_t m = 0; m < members.size(); ++m) totals[m].unmatched += ranges[m].size() - common;
    for (size_t i = 0; i < common; ++i) {
      int64_t first = 0, last = 0, shortest = 0;
      for (size_t m = 0; m < members.size(); ++m) {
        const Collective& c = members[m]->collectives[ranges[m].begin + i];
        first = m == 0 ? c.start_ns : std::min(first, c.start_ns);
        last = m == 0 ? c.start_ns : std::max(last, c.start_ns);
        shortest = m == 0 ? c.dur_ns : std::min(shortest, c.dur_ns);
      }
      spreads.push_back(last - first);
      for (size_t m = 0; m < members.size(); ++m) {
        const Collective& c = members[m]->collectives[ranges[m].begin + i];
        MemberTotals& t = totals[m];
        ++t.matched;
        t.transfer_ns += shortest;
        t.waiting_ns += c.dur_ns - shortest;
        t.lateness.push_back(c.start_ns - first);
      }
    }
  }
  return spreads;
}

}  // namespace

bool IsStraggler(int64_t value, int64_t median, int64_t mad, double k, int64_t margin) {
  const int64_t excess = value - median;
  return excess > 0 && static_cast<double>(excess) > k * static_cast<double>(mad) &&
         excess >= margin;
}

CommunicationReport ComputeCommunication(const TraceModel& model, const Breakdown& breakdown) {
  CommunicationReport c;
  for (const DeviceTimes& d : breakdown.devices) {
    c.nccl_ns += d.times.communication_ns + d.communication_overlapped_ns;
    c.overlapped_ns += d.communication_overlapped_ns;
  }
  for (const StepTimes& s : breakdown.steps) {
    if (s.clipped) continue;
    c.step_ns += s.end_ns - s.start_ns;
    c.step_exposed_ns += s.communication_ns;
  }
  absl::flat_hash_map<uint32_t, uint32_t> local_name;
  for (const GpuOp& op : model.gpu_ops) {
    if (op.kind != GpuOpKind::kCommKernel) continue;
    ++c.kernels;
    auto [it, inserted] = local_name.try_emplace(op.name, static_cast<uint32_t>(c.names.size()));
    if (inserted) c.names.push_back(model.Name(op.name));
    c.collectives.push_back(
        Collective{it->second, model.info.base_time_ns + op.start_ns, op.end_ns - op.start_ns});
  }
  auto by_start = [](const Collective& a, const Collective& b) {
    return std::tie(a.start_ns, a.name) < std::tie(b.start_ns, b.name);
  };
  if (c.collectives.size() > kMaxCollectives) {
    std::nth_element(c.collectives.begin(),
                     c.collectives.begin() + static_cast<std::ptrdiff_t>(kMaxCollectives),
                     c.collectives.end(), by_start);
    c.collectives.resize(kMaxCollectives);
  }
  std::sort(
      c.collectives.begin(), c.collectives.end(), [](const Collective& a, const Collective& b) {
        return std::tie(a.name, a.start_ns, a.dur_ns) < std::tie(b.name, b.start_ns, b.dur_ns);
      });
  c.collectives.shrink_to_fit();
  return c;
}

namespace {

// Fills `across` of every member of one group: the matching, then the
// straggler rule over step times and over arrival lateness.
void AnalyzeGroup(std::vector<TraceReport*>& group, const AnalyzeOptions& options) {
  std::vector<const CommunicationReport*> members;
  members.reserve(group.size());
  for (const TraceReport* r : group) members.push_back(&r->communication);
  std::vector<MemberTotals> totals(group.size());
  const Percentiles spread = ComputePercentiles(MatchCollectives(members, totals));

  std::vector<int64_t> step_p50, lateness_p50, mean_collective;
  for (size_t m = 0; m < group.size(); ++m) {
    RankCommunication& a = group[m]->communication.across;
    a.ranks = group.size();
    a.matched = totals[m].matched;
    a.unmatched = totals[m].unmatched;
    a.transfer_ns = totals[m].transfer_ns;
    a.waiting_ns = totals[m].waiting_ns;
    a.arrival_spread_ns = spread;
    a.lateness_ns = ComputePercentiles(std::move(totals[m].lateness));
    if (group[m]->step_ns.count > 0) step_p50.push_back(group[m]->step_ns.p50);
    if (a.matched > 0) {
      lateness_p50.push_back(a.lateness_ns.p50);
      mean_collective.push_back((a.transfer_ns + a.waiting_ns) / static_cast<int64_t>(a.matched));
    }
  }
  const int64_t step_median = LowerMedian(step_p50);
  const int64_t step_mad = MedianAbsoluteDeviation(step_p50, step_median);
  const int64_t late_median = LowerMedian(lateness_p50);
  const int64_t late_mad = MedianAbsoluteDeviation(lateness_p50, late_median);
  // Lateness matters against the step it delays; without steps, against
  // the typical collective's duration.
  const int64_t late_reference = step_p50.size() >= 2 ? step_median : LowerMedian(mean_collective);
  for (TraceReport* r : group) {
    RankCommunication& a = r->communication.across;
    a.step_median_ns = step_median;
    a.step_mad_ns = step_mad;
    a.lateness_median_ns = late_median;
    a.lateness_mad_ns = late_mad;
    a.step_straggler = step_p50.size() >= 2 && r->step_ns.count > 0 &&
                       IsStraggler(r->step_ns.p50, step_median, step_mad, options.straggler_mad,
                                   static_cast<int64_t>(options.straggler_share *
                                                        static_cast<double>(step_median)));
    a.arrival_straggler =
        lateness_p50.size() >= 2 && a.matched > 0 &&
        IsStraggler(
            a.lateness_ns.p50, late_median, late_mad, options.straggler_mad,
            static_cast<int64_t>(options.straggler_share * static_cast<double>(late_reference)));
  }
}

}  // namespace

void AnalyzeRanks(std::vector<TraceReport>& reports, const AnalyzeOptions& options) {
  // By trace id ("" for the files that carry none, such as kineto's).
  std::map<std::string, std::vector<TraceReport*>> groups;
  for (TraceReport& r : reports) {
    if (r.info.rank >= 0) groups[r.info.trace_id].push_back(&r);
  }
  for (auto& entry : groups) {
    // A named reference: lambdas below capture it (clang before 16 cannot
    // capture a structured binding).
    std::vector<TraceReport*>& group = entry.second;
    std::vector<int64_t> ranks;
    ranks.reserve(group.size());
    for (const TraceReport* r : group) ranks.push_back(r->info.rank);
    std::sort(ranks.begin(), ranks.end());
    const bool distinct = std::adjacent_find(ranks.begin(), ranks.end()) == ranks.end();
    // Nothing to compare without collectives or steps on two ranks.
    const auto with = [&group](auto has) { return std::count_if(group.begin(), group.end(), has); };
    const bool comparable =
        with([](const TraceReport* r) { return !r->communication.collectives.empty(); }) >= 2 ||
        with([](const TraceReport* r) { return r->step_ns.count > 0; }) >= 2;
    if (group.size() < 2 || !distinct || !comparable) continue;
    std::sort(group.begin(), group.end(), [](const TraceReport* a, const TraceReport* b) {
      return a->info.rank < b->info.rank;
    });
    AnalyzeGroup(group, options);
    AppendCrossRankFindings(group, options);
  }
  for (TraceReport& r : reports) {
    r.communication.collectives = {};
    r.communication.names = {};
  }
}

}  // namespace gpuctl::analysis
