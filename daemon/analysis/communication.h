#ifndef GPUCTL_DAEMON_ANALYSIS_COMMUNICATION_H_
#define GPUCTL_DAEMON_ANALYSIS_COMMUNICATION_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/analysis/diagnoses.h"
#include "daemon/analysis/finding.h"
#include "daemon/analysis/trace_model.h"

// Diagnosis 7, communication (docs/analyze.md): NCCL kernels per process,
// and across the ranks of one trace the split of their time between
// transfer and waiting for the slowest rank, arrival spread and stragglers.
namespace gpuctl::analysis {

struct TraceReport;

// One NCCL kernel as the cross-rank matching needs it. `start_ns` is on the
// Unix time axis (base time + `ts`): ranks on different hosts share it only
// as far as their clocks agree.
struct Collective {
  uint32_t name = 0;  // index into ProcessCommunication::names
  int64_t start_ns = 0, dur_ns = 0;
};

// What one rank's collectives showed against the other ranks of its trace.
struct RankCommunication {
  size_t ranks = 0;  // ranks analysed together (0: this file was not)
  // Collectives matched on every rank, and this rank's NCCL kernels left
  // unmatched (a name another rank ran fewer times, or not at all).
  uint64_t matched = 0, unmatched = 0;
  // Over the matched collectives: the shortest duration across ranks is
  // transfer, the rest of this rank's duration is waiting.
  int64_t transfer_ns = 0, waiting_ns = 0;
  // This rank's start minus the earliest rank's, per matched collective.
  Percentiles lateness_ns;
  // The group's: latest minus earliest start per matched collective.
  Percentiles arrival_spread_ns;
  // The straggler rule's reference values over the group's ranks (lower
  // median and median absolute deviation) and its verdicts for this rank.
  int64_t step_median_ns = 0, step_mad_ns = 0;
  int64_t lateness_median_ns = 0, lateness_mad_ns = 0;
  bool step_straggler = false, arrival_straggler = false;
};

struct CommunicationReport {
  uint64_t kernels = 0;
  // NCCL kernel time (per GPU the union, summed over GPUs) and the part of
  // it during which a compute kernel ran on the same GPU.
  int64_t nccl_ns = 0, overlapped_ns = 0;
  // Whole steps: their summed duration and the exposed NCCL time in them.
  int64_t step_ns = 0, step_exposed_ns = 0;
  RankCommunication across;
  // The input of the cross-rank matching, sorted by (name, start); cleared
  // once AnalyzeRanks has run so reports stay small.
  std::vector<std::string> names;
  std::vector<Collective> collectives;
};

CommunicationReport ComputeCommunication(const TraceModel& model, const Breakdown& breakdown);

// Groups `reports` into the ranks of one trace (the same trace id, or all
// files without one; at least two distinct ranks, every rank once, two of
// them with NCCL kernels or whole steps), matches
// their collectives, fills each rank's `communication.across` and appends
// the cross-rank findings (`communication_waiting`, `straggler_step`,
// `straggler_arrival`) to the reports they are about. Frees the collectives.
void AnalyzeRanks(std::vector<TraceReport>& reports, const AnalyzeOptions& options);

// The cross-rank findings of one group (sorted by rank) whose `across` is
// filled, appended to the reports they are about.
void AppendCrossRankFindings(const std::vector<TraceReport*>& group, const AnalyzeOptions& options);

// The straggler rule: whether `value` exceeds `median` by more than `k`
// times `mad` and by at least `margin` (so equal values never qualify).
bool IsStraggler(int64_t value, int64_t median, int64_t mad, double k, int64_t margin);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_COMMUNICATION_H_
