#ifndef GPUCTL_DAEMON_ANALYSIS_DIFF_H_
#define GPUCTL_DAEMON_ANALYSIS_DIFF_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/analysis/analyze.h"
#include "daemon/analysis/finding.h"
#include "daemon/analysis/trace_set.h"

namespace gpuctl::analysis {

// One kernel name's time on both sides of a diff (every process of a side
// summed; 0 on the side where it did not run).
struct KernelChange {
  std::string name;
  uint64_t count_before = 0, count_after = 0;
  int64_t ns_before = 0, ns_after = 0;
  int64_t delta_ns() const { return ns_after - ns_before; }
};

// `gpuctl analyze --diff A B` (docs/analyze.md): what changed from the
// traces of A ("before") to those of B ("after").
struct TraceSetDiff {
  SetSummary before, after;
  // after / before of the pooled whole-step percentiles; 0 when a side has
  // no whole step.
  double step_p50_ratio = 0, step_p99_ratio = 0;
  // Kernels on both sides whose total time changed, by the size of the
  // change (largest first, ties by name), at most `top`; and those on one
  // side only, by their time there. The *_total counts are before the cut.
  std::vector<KernelChange> changed, appeared, disappeared;
  size_t changed_total = 0, appeared_total = 0, disappeared_total = 0;
  // The findings whose id no finding of the other side has, ranked as
  // RankFindings ranks them.
  std::vector<Finding> only_before, only_after;
};

TraceSetDiff DiffTraceSets(const std::vector<TraceReport>& before,
                           const std::vector<TraceReport>& after, size_t top);

// The terminal form, every line at most `columns` (at least 80) wide;
// `before_label` and `after_label` name the sides as the user gave them.
std::string RenderDiffText(const TraceSetDiff& diff, const std::string& before_label,
                           const std::string& after_label, size_t columns = 100);

// The `--html` page of a diff (docs/analyze.md): self-contained as
// RenderHtml's; the step-time shift as a table and bars, the busy/idle
// shift, the changed, appeared and disappeared kernels and the findings of
// one side only. Every label and name is escaped.
std::string RenderDiffHtml(const TraceSetDiff& diff, const std::string& before_label,
                           const std::string& after_label);

// The `--json` document, schema "gpuctl.analyze.diff/1" (docs/analyze.md).
std::string RenderDiffJson(const TraceSetDiff& diff, const std::string& before_label,
                           const std::string& after_label);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_DIFF_H_
