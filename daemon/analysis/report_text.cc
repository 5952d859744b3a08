#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "daemon/analysis/report.h"
#include "daemon/analysis/report_communication.h"
#include "daemon/analysis/report_occupancy.h"
#include "daemon/analysis/units.h"

namespace gpuctl::analysis {
namespace {

// `text` cut to `width` bytes, marked with "~" when cut.
std::string Fit(absl::string_view text, size_t width) {
  if (text.size() <= width) return std::string(text);
  return absl::StrCat(text.substr(0, width - 1), "~");
}

std::string BaseName(absl::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

// Appends `text` word-wrapped to `columns`, every line starting with
// `indent`; a word longer than a line is cut.
void AppendWrapped(std::string* out, absl::string_view text, absl::string_view indent,
                   size_t columns) {
  const size_t width = columns > indent.size() + 20 ? columns - indent.size() : 20;
  std::string line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      absl::StrAppend(out, indent, line, "\n");
      line.clear();
    }
    if (!line.empty()) line += ' ';
    absl::StrAppend(&line, Fit(word, width));
  }
  if (!line.empty()) absl::StrAppend(out, indent, line, "\n");
}

void AppendSummary(std::string* out, const std::vector<TraceReport>& reports, size_t columns) {
  // The other columns and their separators take 70; the file name the rest.
  const size_t name_width = std::clamp<size_t>(columns > 82 ? columns - 70 : 12, 12, 40);
  absl::StrAppend(
      out, absl::StrFormat("%-*s %5s %9s %7s %6s %6s %6s %5s %9s %8s\n",
                           static_cast<int>(name_width), "TRACE", "RANK", "GPU SPAN", "COMPUTE",
                           "COMM", "MEMORY", "IDLE", "STEPS", "STEP p50", "KERNELS"));
  for (const TraceReport& r : reports) {
    const ClassTimes& t = r.breakdown.process;
    const int64_t span = t.span_ns();
    std::string rank = r.info.rank >= 0 ? absl::StrCat(r.info.rank) : "-";
    std::string step = r.step_ns.count > 0 ? FormatNs(r.step_ns.p50) : "-";
    auto share = [&](int64_t v) { return span > 0 ? FormatShare(v, span) : std::string("-"); };
    absl::StrAppend(
        out, absl::StrFormat("%-*s %5s %9s %7s %6s %6s %6s %5d %9s %8d\n",
                             static_cast<int>(name_width), Fit(BaseName(r.info.path), name_width),
                             rank, span > 0 ? FormatNs(span) : "-", share(t.compute_ns),
                             share(t.communication_ns), share(t.memory_ns), share(t.idle_ns),
                             r.breakdown.steps.size(), step, r.launch.kernels));
  }
}

void AppendFinding(std::string* out, size_t n, const Finding& f, size_t columns) {
  std::string head = absl::StrCat(n, ". ", f.id);
  if (f.rank >= 0) absl::StrAppend(&head, " [rank ", f.rank, "]");
  if (!f.data_quality) absl::StrAppend(&head, "  recoverable ~", FormatNs(f.recoverable_ns));
  if (f.low_confidence && !f.data_quality) absl::StrAppend(&head, "  (low confidence)");
  AppendWrapped(out, head, "", columns);
  AppendWrapped(out, f.title, "   ", columns);
  AppendWrapped(out, absl::StrCat("-> ", f.advice), "   ", columns);
  AppendWrapped(out, absl::StrCat("in ", f.trace), "   ", columns);
}

}  // namespace

std::string RenderText(const std::vector<TraceReport>& reports,
                       const std::vector<Finding>& findings, size_t columns) {
  columns = std::max<size_t>(columns, 80);
  std::string out;
  AppendSummary(&out, reports, columns);
  out += RenderRanksText(reports, columns);
  out += RenderOccupancyText(reports, columns);
  size_t n = 0;
  bool quality_header = false, findings_header = false;
  for (const Finding& f : findings) {
    if (f.data_quality && !quality_header) {
      out += "\nDATA QUALITY\n";
      quality_header = true;
    }
    if (!f.data_quality && !findings_header) {
      out += "\nFINDINGS (most recoverable time first)\n";
      findings_header = true;
    }
    AppendFinding(&out, ++n, f, columns);
  }
  if (!findings_header) out += "\nNo findings above the thresholds (docs/analyze.md).\n";
  return out;
}

}  // namespace gpuctl::analysis
