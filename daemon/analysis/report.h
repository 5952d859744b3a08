#ifndef GPUCTL_DAEMON_ANALYSIS_REPORT_H_
#define GPUCTL_DAEMON_ANALYSIS_REPORT_H_

#include <string>
#include <vector>

#include "daemon/analysis/analyze.h"
#include "daemon/analysis/finding.h"

namespace gpuctl::analysis {

// A trace that could not be read, and why.
struct TraceError {
  std::string file;
  std::string message;
};

// The terminal report: a summary table (one row per process trace) and the
// ranked findings, every line at most `columns` wide (at least 60).
std::string RenderText(const std::vector<TraceReport>& reports,
                       const std::vector<Finding>& findings, size_t columns = 100);

// The `--json` document, schema "gpuctl.analyze/1" (docs/analyze.md): one
// object per trace with every diagnosis's numbers, the ranked findings, the
// thresholds used and the files that could not be read.
std::string RenderJson(const std::vector<TraceReport>& reports,
                       const std::vector<Finding>& findings, const std::vector<TraceError>& errors,
                       const AnalyzeOptions& options);

// The `--html` page (docs/analyze.md): one self-contained file that loads
// nothing and runs no script (its Content-Security-Policy forbids both): the
// per-trace summary, a ranks-by-time GPU busy heatmap and stacked step-time
// bars as inline SVG, the top kernels, copies and synchronize calls, the
// ranked findings with where to look in Perfetto, the files that could not
// be read and the thresholds used. Every string from a trace or a path is
// escaped. Its size follows the reports', not the traces'; the same input
// gives the same bytes.
std::string RenderHtml(const std::vector<TraceReport>& reports,
                       const std::vector<Finding>& findings, const std::vector<TraceError>& errors,
                       const AnalyzeOptions& options);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_REPORT_H_
