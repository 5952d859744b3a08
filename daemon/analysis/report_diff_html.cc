#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/analysis/diff.h"
#include "daemon/analysis/html_writer.h"
#include "daemon/analysis/units.h"

namespace gpuctl::analysis {
namespace {

using html::Escape;

std::string DiffNsCell(const char* cls, int64_t ns) {
  return absl::StrCat("<td class=\"", cls, "\" data-ns=\"", ns, "\">", ns > 0 ? FormatNs(ns) : "-",
                      "</td>");
}

std::string RatioText(double ratio) {
  return ratio > 0 ? absl::StrFormat("x%.2f", ratio) : std::string("-");
}

// Before and after of one percentile as two bars on a shared scale.
void AppendStepBar(std::string* out, const char* name, int64_t before, int64_t after, int64_t scale,
                   int row) {
  constexpr int kWidth = 560, kLeft = 60, kBar = 14;
  const int y = row * 40 + 6;
  auto width = [&](int64_t ns) {
    return scale > 0 ? static_cast<double>(ns) / static_cast<double>(scale) * kWidth : 0.0;
  };
  absl::StrAppend(out, "<g class=\"step-shift\" data-pct=\"", name, "\"><text x=\"0\" y=\"",
                  y + kBar + 4, "\">step ", name, "</text>");
  const int64_t values[2] = {before, after};
  const char* sides[2] = {"before", "after"};
  for (int i = 0; i < 2; ++i) {
    absl::StrAppend(out, "<rect class=\"step-shift-bar ", sides[i], "\" data-side=\"", sides[i],
                    "\" data-ns=\"", values[i], "\" x=\"", kLeft, "\" y=\"", y + i * (kBar + 2),
                    "\" height=\"", kBar, "\" width=\"", absl::StrFormat("%.1f", width(values[i])),
                    "\" fill=\"", i == 0 ? "#8c959f" : "#0969da", "\"><title>", sides[i], " ",
                    values[i] > 0 ? FormatNs(values[i]) : "-", "</title></rect>");
  }
  absl::StrAppend(out, "</g>");
}

void AppendStepShift(std::string* out, const TraceSetDiff& d) {
  absl::StrAppend(out,
                  "<section id=\"diff-steps\"><h2>Step time</h2>\n<p class=\"note\">Whole steps "
                  "of every process of a side, pooled: ",
                  d.before.steps.count, " before, ", d.after.steps.count,
                  " after.</p>\n<table id=\"diff-steps-table\"><thead><tr><th></th><th>before"
                  "</th><th>after</th><th>after / before</th></tr></thead><tbody>\n");
  const struct {
    const char* name;
    int64_t before, after;
    double ratio;
  } rows[2] = {{"p50", d.before.steps.p50, d.after.steps.p50, d.step_p50_ratio},
               {"p99", d.before.steps.p99, d.after.steps.p99, d.step_p99_ratio}};
  for (const auto& r : rows) {
    absl::StrAppend(out, "<tr class=\"diff-step\" data-pct=\"", r.name, "\"><td>step ", r.name,
                    "</td>", DiffNsCell("before", r.before), DiffNsCell("after", r.after),
                    "<td class=\"ratio\" data-ratio=\"", absl::StrFormat("%.4f", r.ratio), "\">",
                    RatioText(r.ratio), "</td></tr>\n");
  }
  const int64_t scale =
      std::max({d.before.steps.p99, d.after.steps.p99, d.before.steps.p50, d.after.steps.p50});
  absl::StrAppend(out,
                  "</tbody></table>\n<svg id=\"diff-steps-svg\" width=\"640\" height=\"84\" "
                  "role=\"img\" aria-label=\"step time before and after\">");
  AppendStepBar(out, "p50", rows[0].before, rows[0].after, scale, 0);
  AppendStepBar(out, "p99", rows[1].before, rows[1].after, scale, 1);
  absl::StrAppend(out,
                  "</svg>\n<p class=\"legend\"><span class=\"swatch\" style=\"background:"
                  "#8c959f\"></span> before <span class=\"swatch\" style=\"background:#0969da\">"
                  "</span> after</p></section>\n");
}

void AppendBusyShift(std::string* out, const TraceSetDiff& d) {
  absl::StrAppend(out,
                  "<section id=\"diff-busy\"><h2>GPU busy and idle</h2>\n<table "
                  "id=\"diff-busy-table\"><thead><tr><th></th><th>before</th><th>after</th>"
                  "<th>shift</th></tr></thead><tbody>\n");
  const struct {
    const char* name;
    double before, after;
  } rows[2] = {{"busy", d.before.busy_share(), d.after.busy_share()},
               {"idle", d.before.idle_share(), d.after.idle_share()}};
  for (const auto& r : rows) {
    const double shift = 100 * (r.after - r.before);
    absl::StrAppend(out, "<tr data-share=\"", r.name, "\"><td>", r.name,
                    "</td><td class=\"before\">", absl::StrFormat("%.1f%%", 100 * r.before),
                    "</td><td class=\"after\">", absl::StrFormat("%.1f%%", 100 * r.after),
                    "</td><td class=\"shift\" data-points=\"", absl::StrFormat("%.2f", shift),
                    "\">", absl::StrFormat("%+.1f points", shift), "</td></tr>\n");
  }
  absl::StrAppend(out, "</tbody></table>\n<p class=\"note\">Of the processes' summed GPU spans: ",
                  FormatNs(d.before.gpu_span_ns), " before, ", FormatNs(d.after.gpu_span_ns),
                  " after.</p></section>\n");
}

void AppendKernelTable(std::string* out, const std::vector<KernelChange>& rows, size_t total,
                       const char* kind, const char* heading) {
  absl::StrAppend(out, "<h3>", heading, " <span class=\"note\">(", rows.size(), " of ", total,
                  ")</span></h3>\n<div class=\"scroll\"><table class=\"diff-kernels\" "
                  "data-kind=\"",
                  kind, "\" data-total=\"", total,
                  "\"><thead><tr><th class=\"name\">kernel</th><th>change</th><th>before</th>"
                  "<th>after</th><th>count before</th><th>count after</th><th>mean before</th>"
                  "<th>mean after</th></tr></thead><tbody>\n");
  if (rows.empty()) absl::StrAppend(out, "<tr class=\"none\"><td colspan=\"8\">none</td></tr>\n");
  for (const KernelChange& k : rows) {
    auto mean = [](int64_t ns, uint64_t count) {
      return count > 0 ? ns / static_cast<int64_t>(count) : 0;
    };
    absl::StrAppend(out, "<tr class=\"kernel-row\"><td class=\"name\">", Escape(k.name),
                    "</td><td class=\"delta\" data-ns=\"", k.delta_ns(), "\">",
                    k.delta_ns() >= 0 ? "+" : "-", FormatNs(std::abs(k.delta_ns())), "</td>",
                    DiffNsCell("before", k.ns_before), DiffNsCell("after", k.ns_after),
                    "<td class=\"count-before\">", k.count_before,
                    "</td><td class=\"count-after\">", k.count_after, "</td>",
                    DiffNsCell("mean-before", mean(k.ns_before, k.count_before)),
                    DiffNsCell("mean-after", mean(k.ns_after, k.count_after)), "</tr>\n");
  }
  absl::StrAppend(out, "</tbody></table></div>\n");
}

void AppendOneSideFindings(std::string* out, const std::vector<Finding>& findings, const char* side,
                           const char* heading) {
  absl::StrAppend(out, "<h3>", heading, "</h3>\n");
  if (findings.empty()) {
    absl::StrAppend(out, "<p class=\"note none\" data-side=\"", side, "\">none</p>\n");
    return;
  }
  absl::StrAppend(out, "<ol class=\"diff-findings\" data-side=\"", side, "\">\n");
  for (const Finding& f : findings) {
    absl::StrAppend(out, "<li class=\"finding\" data-id=\"", Escape(f.id), "\" data-rank=\"",
                    f.rank, "\" data-recoverable-ns=\"", f.recoverable_ns,
                    "\"><div class=\"head\">", Escape(f.id));
    if (f.rank >= 0) absl::StrAppend(out, " [rank ", f.rank, "]");
    if (!f.data_quality)
      absl::StrAppend(out, " \xC2\xB7 recoverable ~", FormatNs(f.recoverable_ns));
    absl::StrAppend(out, "</div>\n<div class=\"title\">", Escape(f.title),
                    "</div>\n<div class=\"advice\">", Escape(f.advice),
                    "</div>\n<div class=\"note\">in ", Escape(f.trace), "</div></li>\n");
  }
  absl::StrAppend(out, "</ol>\n");
}

}  // namespace

std::string RenderDiffHtml(const TraceSetDiff& d, const std::string& before_label,
                           const std::string& after_label) {
  std::string out = html::PageStart("gpuctl analyze --diff");
  absl::StrAppend(
      &out, "<header><h1>gpuctl analyze --diff</h1><p class=\"note\">Before: <span id=\"before\">",
      Escape(before_label), "</span> (", d.before.processes,
      " process(es)). After: <span id=\"after\">", Escape(after_label), "</span> (",
      d.after.processes,
      " process(es)).</p><nav><a href=\"#diff-steps\">step time</a> \xC2\xB7 <a "
      "href=\"#diff-busy\">GPU busy</a> \xC2\xB7 <a href=\"#diff-kernels\">kernels</a> \xC2\xB7 "
      "<a href=\"#diff-findings\">findings</a></nav></header>\n");
  AppendStepShift(&out, d);
  AppendBusyShift(&out, d);
  absl::StrAppend(&out,
                  "<section id=\"diff-kernels\"><h2>Kernels</h2>\n<p class=\"note\">Every "
                  "process of a side summed; totals are not scaled to the steps a side "
                  "covers.</p>\n");
  AppendKernelTable(&out, d.changed, d.changed_total, "changed",
                    "Kernels whose total time changed");
  AppendKernelTable(&out, d.appeared, d.appeared_total, "appeared", "Kernels that appeared");
  AppendKernelTable(&out, d.disappeared, d.disappeared_total, "disappeared",
                    "Kernels that disappeared");
  absl::StrAppend(&out,
                  "</section>\n<section id=\"diff-findings\"><h2>Findings on one side "
                  "only</h2>\n");
  AppendOneSideFindings(&out, d.only_after, "after", "Only after");
  AppendOneSideFindings(&out, d.only_before, "before", "Only before (gone after)");
  absl::StrAppend(&out, "</section>\n</body>\n</html>\n");
  return out;
}

}  // namespace gpuctl::analysis
