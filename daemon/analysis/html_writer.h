#ifndef GPUCTL_DAEMON_ANALYSIS_HTML_WRITER_H_
#define GPUCTL_DAEMON_ANALYSIS_HTML_WRITER_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "daemon/analysis/analyze.h"

// The pieces of RenderHtml (report.h): escaping and the two SVG charts.
namespace gpuctl::analysis::html {

// `text` as HTML text or a quoted attribute value: & < > " ' escaped, bytes
// that are not valid UTF-8 and control characters (but tab and newline)
// replaced by U+FFFD. Trace files are untrusted: every string from one goes
// through here.
std::string Escape(absl::string_view text);

// A trace's short name: "rank N", else its file's base name.
std::string TraceLabel(const TraceReport& report);
std::string BaseName(absl::string_view path);

// The ranks-by-time heatmap: one row (`g.heat-row`) per report, one cell
// (`rect.heat-cell`) per timeline bucket, coloured by the GPU busy fraction.
// Rows share one time axis when every window overlaps the others (the
// ranks of one trace); otherwise each row spans its own window.
void AppendHeatmap(std::string* out, const std::vector<TraceReport>& reports);

// One SVG per report with steps: a bar per step (`g.step-bar`), stacked
// compute, communication, memory and idle, at most kMaxStepBars bars.
inline constexpr size_t kMaxStepBars = 400;
void AppendStepBars(std::string* out, const TraceReport& report);

// A page's start up to its open <body>: the head with the policy that
// forbids every fetch and script, `title` (escaped here) and the styles.
std::string PageStart(absl::string_view title);

}  // namespace gpuctl::analysis::html

#endif  // GPUCTL_DAEMON_ANALYSIS_HTML_WRITER_H_
