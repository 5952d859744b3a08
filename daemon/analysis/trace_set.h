#ifndef GPUCTL_DAEMON_ANALYSIS_TRACE_SET_H_
#define GPUCTL_DAEMON_ANALYSIS_TRACE_SET_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/analysis/analyze.h"
#include "daemon/analysis/diagnoses.h"

namespace gpuctl::analysis {

// Several process traces taken as one (a trace's ranks, or a job's sampled
// traces): what `gpuctl analyze --since` reports over the set and what
// `--diff` compares (docs/analyze.md).
struct SetSummary {
  size_t processes = 0;  // reports summed
  // Over every process: first to last GPU op, summed (SummaryOf); busy =
  // compute + communication + memory.
  int64_t gpu_span_ns = 0, busy_ns = 0, idle_ns = 0;
  // Every whole step of every process, pooled.
  Percentiles steps;
  // Every kernel (compute and NCCL) by name over every process, by total
  // time, largest first (ties by name).
  std::vector<OpTotals> kernels;
  // busy_ns / gpu_span_ns and idle_ns / gpu_span_ns; 0 without GPU ops.
  double busy_share() const;
  double idle_share() const;
};

SetSummary SummarizeSet(const std::vector<TraceReport>& reports);

// "across N traces, P processes: GPU busy 72.0% (idle 28.0%) of 4.1 s;
// 300 steps p50 181 ms p99 240 ms" and the `top` kernels with the most time,
// each line at most `columns` wide.
std::string RenderSetText(const SetSummary& set, size_t traces, size_t top, size_t columns);

// The JSON object of a SetSummary (docs/analyze.md, "aggregate"), the
// `top` kernels with the most time.
std::string RenderSetJson(const SetSummary& set, size_t top);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_TRACE_SET_H_
