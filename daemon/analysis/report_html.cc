#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/analysis/html_writer.h"
#include "daemon/analysis/report.h"
#include "daemon/analysis/report_communication.h"
#include "daemon/analysis/report_occupancy.h"
#include "daemon/analysis/units.h"

namespace gpuctl::analysis {
namespace {

using html::Escape;

// Inline only: the policy forbids every fetch and every script, so nothing
// a trace smuggles into the page could load or run.
constexpr absl::string_view kHtmlHead = R"(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta http-equiv="x-dns-prefetch-control" content="off">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="gpuctl analyze">
)";

constexpr absl::string_view kHtmlStyle = R"(<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em auto; max-width: 1040px; color: #1b1f24; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; border-bottom: 1px solid #d0d7de; padding-bottom: 0.2em; margin-top: 2em; }
h3 { font-size: 1em; margin: 1.2em 0 0.4em; }
table { border-collapse: collapse; margin: 0.4em 0 1em; }
th, td { padding: 3px 8px; border-bottom: 1px solid #eaeef2; text-align: right; vertical-align: top; white-space: nowrap; }
th { background: #f6f8fa; white-space: normal; }
.scroll { overflow-x: auto; }
td.name, th.name { text-align: left; max-width: 480px; overflow-wrap: anywhere; white-space: normal; }
td.host { text-align: left; }
td.file { min-width: 12em; word-break: break-all; }
tr.none td { color: #57606a; text-align: left; }
code { background: #f6f8fa; padding: 1px 4px; overflow-wrap: anywhere; }
.caption, .legend, .note { color: #57606a; font-size: 0.9em; }
.swatch { display: inline-block; width: 1.2em; height: 0.9em; vertical-align: middle; border: 1px solid #d0d7de; }
svg text { font: 11px system-ui, sans-serif; fill: #1b1f24; }
.tick { stroke: #57606a; }
.seg-compute, .sw-compute { fill: #2f6fb3; background: #2f6fb3; }
.seg-communication, .sw-communication { fill: #d9822b; background: #d9822b; }
.seg-memory, .sw-memory { fill: #3a9e5c; background: #3a9e5c; }
.seg-idle, .sw-idle { fill: #d0d7de; background: #d0d7de; }
.step-bar.clipped { opacity: 0.45; }
ol.findings > li { margin-bottom: 1.2em; }
.finding .head { font-weight: 600; }
.finding .advice::before { content: "\2192  "; }
.finding.data-quality .head { color: #9a6700; }
.low-confidence { color: #9a6700; font-weight: normal; }
table.numbers { font-size: 0.9em; }
.error { color: #cf222e; }
.memory-line { fill: none; stroke: #3a9e5c; stroke-width: 2; }
.memory-point { fill: #3a9e5c; }
.memory-limit { stroke: #cf222e; stroke-dasharray: 4 3; }
.memory-grid { stroke: #eaeef2; }
</style>
</head>
)";

std::string ShareOf(int64_t part, int64_t whole) {
  return whole > 0 ? FormatShare(part, whole) : std::string("-");
}

// A table cell with the raw value for scripts and tests, and a readable one.
std::string NsCell(int64_t ns) {
  return absl::StrCat("<td data-ns=\"", ns, "\">", FormatNs(ns), "</td>");
}

std::string GibCell(int64_t bytes) {
  return absl::StrFormat("<td data-bytes=\"%d\">%.2f GiB</td>", bytes,
                         static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30));
}

// One device's allocated bytes at its step boundaries as a line, with the
// device's size as a dashed line when it is within twice the highest point.
void AppendMemoryChart(std::string* out, const DeviceMemory& d) {
  constexpr int kWidth = 640, kHeight = 150, kLeft = 72, kRight = 12, kTop = 10, kBottom = 24;
  const std::vector<int64_t>& b = d.step_bytes;
  int64_t top = std::max<int64_t>(1, *std::max_element(b.begin(), b.end()));
  const bool show_limit =
      d.total_bytes > 0 && static_cast<double>(d.total_bytes) <= 2.0 * static_cast<double>(top);
  if (show_limit) top = std::max(top, static_cast<int64_t>(d.total_bytes));
  const double scale = static_cast<double>(top) * 1.05;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto x = [&](size_t i) {
    return kLeft + (b.size() == 1
                        ? 0.0
                        : plot_w * static_cast<double>(i) / static_cast<double>(b.size() - 1));
  };
  auto y = [&](int64_t v) { return kTop + plot_h * (1.0 - static_cast<double>(v) / scale); };
  absl::StrAppendFormat(out,
                        "<svg class=\"memory-chart\" data-device=\"%d\" data-points=\"%d\" "
                        "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">\n",
                        d.device, b.size(), kWidth, kHeight, kWidth, kHeight);
  const bool gib = top >= int64_t{1} << 30;
  for (double frac : {0.0, 0.5, 1.0}) {
    const auto v = static_cast<int64_t>(frac * static_cast<double>(top));
    absl::StrAppendFormat(
        out,
        "<line class=\"memory-grid\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/><text "
        "x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.1f %s</text>\n",
        kLeft, kWidth - kRight, y(v), y(v), kLeft - 6, y(v) + 4,
        static_cast<double>(v) / static_cast<double>(int64_t{1} << (gib ? 30 : 20)),
        gib ? "GiB" : "MiB");
  }
  if (show_limit) {
    const auto total = static_cast<int64_t>(d.total_bytes);
    absl::StrAppendFormat(out,
                          "<line class=\"memory-limit\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" "
                          "y2=\"%.1f\"><title>the device's memory</title></line>\n",
                          kLeft, kWidth - kRight, y(total), y(total));
  }
  std::string points;
  for (size_t i = 0; i < b.size(); ++i) {
    absl::StrAppendFormat(&points, "%s%.1f,%.1f", i == 0 ? "" : " ", x(i), y(b[i]));
  }
  absl::StrAppend(out, "<polyline class=\"memory-line\" points=\"", points, "\"/>\n");
  for (size_t i = 0; i < b.size(); ++i) {
    const std::string when = i == 0 ? absl::StrCat("start of step ", d.step_numbers.front())
                                    : absl::StrCat("end of step ", d.step_numbers[i - 1]);
    absl::StrAppendFormat(out,
                          "<circle class=\"memory-point\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\" "
                          "data-bytes=\"%d\"><title>%s: %.2f GiB</title></circle>\n",
                          x(i), y(b[i]), b[i], when,
                          static_cast<double>(b[i]) / static_cast<double>(int64_t{1} << 30));
  }
  absl::StrAppendFormat(out,
                        "<text x=\"%d\" y=\"%d\">step %d start</text><text x=\"%d\" y=\"%d\" "
                        "text-anchor=\"end\">step %d end</text>\n</svg>\n",
                        kLeft, kHeight - 6, d.step_numbers.front(), kWidth - kRight, kHeight - 6,
                        d.step_numbers.back());
}

// Diagnosis 10's numbers per trace and device, and each device's bytes at
// its step boundaries as a chart.
void AppendHtmlDeviceMemory(std::string* out, const std::vector<TraceReport>& reports) {
  auto has_memory = [](const TraceReport& r) { return !r.memory.devices.empty(); };
  if (std::none_of(reports.begin(), reports.end(), has_memory)) return;
  absl::StrAppend(out,
                  "<section id=\"memory\"><h2>Device memory</h2>\n<p class=\"note\">Allocated "
                  "bytes at the first whole step's start and at each step's end: PyTorch's "
                  "caching allocator's view when the trace has it (its reserved bytes, what it "
                  "holds of the device, beside), else gpuctl's count of CUDA allocations since "
                  "the window began (a lower bound; with the caching allocator, its reserved "
                  "memory rather than live tensors).</p>\n");
  for (const TraceReport& r : reports) {
    if (!has_memory(r)) continue;
    absl::StrAppend(out, "<h3>", Escape(html::TraceLabel(r)),
                    "</h3>\n<table class=\"memory-devices\" data-rank=\"", r.info.rank,
                    "\" data-file=\"", Escape(r.info.path),
                    "\"><thead><tr><th>GPU</th><th class=\"name\">source</th><th>peak</th>"
                    "<th>reserved peak</th><th>device</th><th>of the device</th>"
                    "<th>growth per step</th><th>full in</th></tr></thead><tbody>\n");
    for (const DeviceMemory& d : r.memory.devices) {
      const int64_t held = d.held_peak_bytes();
      absl::StrAppend(
          out, "<tr><td>", d.device, "</td><td class=\"name\">",
          d.allocator ? "PyTorch allocator" : "CUDA allocations", "</td>", GibCell(d.peak_bytes),
          d.peak_reserved_bytes >= 0 ? GibCell(d.peak_reserved_bytes) : "<td>-</td>",
          d.total_bytes > 0 ? GibCell(static_cast<int64_t>(d.total_bytes)) : "<td>-</td>",
          "<td class=\"memory-share\">",
          d.total_bytes > 0 ? ShareOf(held, static_cast<int64_t>(d.total_bytes)) : "-", "</td><td>",
          d.growing ? absl::StrFormat("%.1f MiB", d.growth_bytes_per_step / (1 << 20)) : "-",
          "</td><td>", d.steps_until_full >= 0 ? absl::StrCat(d.steps_until_full, " steps") : "-",
          "</td></tr>\n");
    }
    absl::StrAppend(out, "</tbody></table>\n");
    for (const DeviceMemory& d : r.memory.devices) {
      if (d.step_bytes.size() >= 2) AppendMemoryChart(out, d);
    }
  }
  absl::StrAppend(out, "</section>\n");
}

std::string TraceAttrs(const TraceReport& r) {
  return absl::StrCat(" data-rank=\"", r.info.rank, "\" data-file=\"", Escape(r.info.path), "\"");
}

void AppendHtmlSummary(std::string* out, const std::vector<TraceReport>& reports,
                       const std::vector<Finding>& findings) {
  absl::flat_hash_map<std::string, size_t> per_trace;
  for (const Finding& f : findings) ++per_trace[f.trace];
  absl::StrAppend(
      out,
      "<section id=\"summary\"><h2>Per-rank summary</h2>\n"
      "<div class=\"scroll\"><table id=\"summary-table\"><thead><tr><th class=\"name\">trace</th>"
      "<th>rank</th><th class=\"name\">host</th><th>pid</th><th>GPU span</th>"
      "<th>compute</th><th>comm</th><th>memory</th><th>idle</th>"
      "<th>steps</th><th>step p50</th><th>step p99</th><th>kernels</th>"
      "<th>findings</th></tr></thead><tbody>\n");
  for (const TraceReport& r : reports) {
    const ClassTimes& t = r.breakdown.process;
    const int64_t span = t.span_ns();
    auto share = [&](const char* cls, int64_t ns) {
      return absl::StrCat("<td class=\"", cls, "\" data-ns=\"", ns, "\">", ShareOf(ns, span),
                          "</td>");
    };
    auto it = per_trace.find(r.info.path);
    absl::StrAppend(
        out, "<tr class=\"trace-row\"", TraceAttrs(r), "><td class=\"name file\">",
        Escape(html::BaseName(r.info.path)), "</td><td>",
        r.info.rank >= 0 ? absl::StrCat(r.info.rank) : "-", "</td><td class=\"host\">",
        Escape(r.info.host), "</td><td>", r.info.pid >= 0 ? absl::StrCat(r.info.pid) : "-", "</td>",
        NsCell(span), share("compute", t.compute_ns), share("communication", t.communication_ns),
        share("memory", t.memory_ns), share("idle", t.idle_ns), "<td>", r.breakdown.steps.size(),
        "</td>", r.step_ns.count > 0 ? NsCell(r.step_ns.p50) : "<td>-</td>",
        r.step_ns.count > 0 ? NsCell(r.step_ns.p99) : "<td>-</td>", "<td>", r.launch.kernels,
        "</td><td>", it == per_trace.end() ? 0 : it->second, "</td></tr>\n");
  }
  absl::StrAppend(out,
                  "</tbody></table></div>\n<p class=\"note\">Shares are of the GPU span (first "
                  "to last GPU op of the process); the four (comm: NCCL kernels not overlapped "
                  "by compute) add up to it.</p></section>\n");
}

void AppendHtmlSteps(std::string* out, const std::vector<TraceReport>& reports) {
  absl::StrAppend(out,
                  "<section id=\"steps\"><h2>Step time</h2>\n<p class=\"legend\">"
                  "<span class=\"swatch sw-compute\"></span> compute "
                  "<span class=\"swatch sw-communication\"></span> communication "
                  "<span class=\"swatch sw-memory\"></span> memory "
                  "<span class=\"swatch sw-idle\"></span> idle; faded: a step cut by the "
                  "window's end</p>\n");
  for (const TraceReport& r : reports) {
    absl::StrAppend(out, "<h3>", Escape(html::TraceLabel(r)), " <span class=\"note\">",
                    Escape(html::BaseName(r.info.path)), "</span></h3>\n");
    html::AppendStepBars(out, r);
  }
  absl::StrAppend(out, "</section>\n");
}

void AppendHtmlTopTables(std::string* out, const TraceReport& r) {
  const int64_t span = r.breakdown.process.span_ns();
  absl::StrAppend(out, "<h3>", Escape(html::TraceLabel(r)), " <span class=\"note\">",
                  Escape(html::BaseName(r.info.path)), "</span></h3>\n");
  absl::StrAppend(out, "<table class=\"top-kernels\"", TraceAttrs(r),
                  "><thead><tr><th class=\"name\">kernel</th><th>count</th><th>total</th>"
                  "<th>of GPU span</th><th>mean</th><th>max</th></tr></thead><tbody>\n");
  if (r.top.kernels.empty())
    absl::StrAppend(out, "<tr class=\"none\"><td colspan=\"6\">none</td></tr>\n");
  for (const OpTotals& k : r.top.kernels) {
    absl::StrAppend(out, "<tr><td class=\"name\">", Escape(k.name), "</td><td>", k.count, "</td>",
                    NsCell(k.total_ns), "<td>", ShareOf(k.total_ns, span), "</td>",
                    NsCell(k.total_ns / static_cast<int64_t>(k.count)), NsCell(k.max_ns),
                    "</tr>\n");
  }
  absl::StrAppend(out, "</tbody></table>\n<table class=\"top-copies\"", TraceAttrs(r),
                  "><thead><tr><th class=\"name\">copy or memset</th><th>count</th>"
                  "<th>bytes</th><th>total</th><th>GB/s</th><th>max</th></tr></thead><tbody>\n");
  if (r.top.copies.empty())
    absl::StrAppend(out, "<tr class=\"none\"><td colspan=\"6\">none</td></tr>\n");
  for (const OpTotals& c : r.top.copies) {
    const double gbps =
        c.total_ns > 0 ? static_cast<double>(c.bytes) / static_cast<double>(c.total_ns) : 0;
    absl::StrAppend(out, "<tr><td class=\"name\">", Escape(c.name), "</td><td>", c.count,
                    "</td><td data-bytes=\"", c.bytes, "\">", FormatBytes(c.bytes), "</td>",
                    NsCell(c.total_ns), "<td>", absl::StrFormat("%.1f", gbps), "</td>",
                    NsCell(c.max_ns), "</tr>\n");
  }
  absl::StrAppend(out, "</tbody></table>\n<table class=\"top-syncs\"", TraceAttrs(r),
                  "><thead><tr><th class=\"name\">synchronize call</th><th>count</th>"
                  "<th>host time</th><th>mean</th></tr></thead><tbody>\n");
  if (r.sync.by_call.empty())
    absl::StrAppend(out, "<tr class=\"none\"><td colspan=\"4\">none</td></tr>\n");
  for (const NamedTime& s : r.sync.by_call) {
    absl::StrAppend(out, "<tr><td class=\"name\">", Escape(s.name), "</td><td>", s.count, "</td>",
                    NsCell(s.ns), NsCell(s.ns / static_cast<int64_t>(s.count)), "</tr>\n");
  }
  absl::StrAppend(out, "</tbody></table>\n");
}

// Where a finding's largest instance is, and how to get there in Perfetto.
void AppendHtmlWhere(std::string* out, const Finding& f, const TraceReport* r) {
  if (f.at.empty()) return;
  const int64_t dur = f.at.end_ns - f.at.start_ns;
  std::string into;
  // Only a window the timeline could use (a plausible one: the file says
  // where it is) is worth counting from.
  const BusyTimeline* t = r == nullptr ? nullptr : &r->breakdown.timeline;
  if (t != nullptr && r->info.has_window && t->start_ns == r->info.window_start_ns &&
      t->end_ns == r->info.window_end_ns && f.at.start_ns >= t->start_ns &&
      f.at.start_ns <= t->end_ns) {
    into = absl::StrCat(", ", FormatNs(f.at.start_ns - t->start_ns),
                        " after the capture window opened");
  }
  absl::StrAppend(
      out, "<p class=\"where\" data-start-ns=\"", f.at.start_ns, "\" data-end-ns=\"", f.at.end_ns,
      "\">Largest instance: ts ", absl::StrFormat("%.3f", static_cast<double>(f.at.start_ns) / 1e3),
      " to ", absl::StrFormat("%.3f", static_cast<double>(f.at.end_ns) / 1e3), " \xC2\xB5s (",
      FormatNs(dur), into, "). In <a class=\"perfetto\" href=\"https://ui.perfetto.dev/\" ",
      "target=\"_blank\" rel=\"noopener noreferrer\">Perfetto UI</a>, open ",
      Escape(html::BaseName(f.trace)), ", then in Query (SQL): <code class=\"perfetto-query\">",
      "select id, ts, dur, name from slice where ts &lt;= ", f.at.end_ns,
      " and ts + dur &gt;= ", f.at.start_ns, " order by ts</code></p>\n");
}

void AppendHtmlFindings(std::string* out, const std::vector<TraceReport>& reports,
                        const std::vector<Finding>& findings) {
  absl::flat_hash_map<std::string, const TraceReport*> by_path;
  for (const TraceReport& r : reports) by_path.try_emplace(r.info.path, &r);
  absl::StrAppend(
      out,
      "<section id=\"findings\"><h2>Findings</h2>\n<p class=\"note\">Data-quality findings "
      "first, then by the time fixing each could give back. Times are on the trace's own "
      "<code>ts</code> axis. A link cannot open a local file in Perfetto at a given time, so "
      "each finding with a single largest instance gives its times and a query for "
      "Perfetto's Query (SQL) page: open the trace file in the Perfetto UI, run the query "
      "and click a row to jump to that slice (Perfetto keeps a JSON trace's ts, in ns).</p>\n");
  if (findings.empty()) {
    absl::StrAppend(out, "<p id=\"no-findings\">No findings above the thresholds.</p></section>\n");
    return;
  }
  absl::StrAppend(out, "<ol class=\"findings\">\n");
  for (size_t i = 0; i < findings.size(); ++i) {
    const Finding& f = findings[i];
    auto report = by_path.find(f.trace);
    absl::StrAppend(out, "<li class=\"finding", f.data_quality ? " data-quality" : "",
                    "\" id=\"finding-", i + 1, "\" data-id=\"", Escape(f.id), "\" data-rank=\"",
                    f.rank, "\" data-recoverable-ns=\"", f.recoverable_ns,
                    "\"><div class=\"head\">", Escape(f.id));
    if (f.rank >= 0) absl::StrAppend(out, " [rank ", f.rank, "]");
    if (!f.data_quality) {
      absl::StrAppend(out, " \xC2\xB7 recoverable ~<span class=\"recoverable\">",
                      FormatNs(f.recoverable_ns), "</span>");
    }
    if (f.low_confidence && !f.data_quality) {
      absl::StrAppend(out, " <span class=\"low-confidence\">(low confidence)</span>");
    }
    absl::StrAppend(out, "</div>\n<div class=\"title\">", Escape(f.title),
                    "</div>\n<div class=\"advice\">", Escape(f.advice), "</div>\n");
    if (!f.numbers.empty()) {
      absl::StrAppend(out, "<table class=\"numbers\"><tbody>");
      for (const auto& [name, value] : f.numbers) {
        absl::StrAppend(out, "<tr><td class=\"name\">", Escape(name), "</td><td class=\"value\">",
                        absl::StrFormat("%.10g", value), "</td></tr>");
      }
      absl::StrAppend(out, "</tbody></table>\n");
    }
    AppendHtmlWhere(out, f, report == by_path.end() ? nullptr : report->second);
    absl::StrAppend(out, "<div class=\"note\">in ", Escape(f.trace), "</div></li>\n");
  }
  absl::StrAppend(out, "</ol></section>\n");
}

void AppendHtmlErrorsAndOptions(std::string* out, const std::vector<TraceError>& errors,
                                const AnalyzeOptions& o) {
  if (!errors.empty()) {
    absl::StrAppend(out,
                    "<section id=\"errors\"><h2>Files that could not be read</h2>\n<table>"
                    "<tbody>\n");
    for (const TraceError& e : errors) {
      absl::StrAppend(out, "<tr class=\"error-row\"><td class=\"name\">", Escape(e.file),
                      "</td><td class=\"name error\">", Escape(e.message), "</td></tr>\n");
    }
    absl::StrAppend(out, "</tbody></table></section>\n");
  }
  absl::StrAppend(
      out, "<section id=\"options\"><h2>Thresholds</h2>\n<p class=\"note\">",
      absl::StrFormat(
          "small kernel under %s (launch-bound from %.0f%% small and %d kernels); launch "
          "gaps up to %s are launch overhead; findings from %.1f%% of the GPU span; exposed "
          "communication from %.0f%%; waiting for other ranks from %.0f%% of NCCL time; "
          "stragglers over the ranks' median by %.1f MADs and %.0f%%; occupancy under "
          "%.0f%% is low; ",
          FormatNs(o.small_kernel_ns), 100 * o.small_kernel_share, o.min_kernels,
          FormatNs(o.launch_gap_ns), 100 * o.min_share, 100 * o.exposed_comm_share,
          100 * o.comm_wait_share, o.straggler_mad, 100 * o.straggler_share,
          100 * o.occupancy_share),
      o.link_gbps > 0 ? absl::StrFormat("copies under %.0f%% of a %.1f GB/s link are slow",
                                        100 * o.copy_bandwidth_share, o.link_gbps)
                      : std::string("copy bandwidth not judged (no --link-gbps)"),
      ". Definitions: docs/analyze.md.</p></section>\n");
}

}  // namespace

std::string html::PageStart(absl::string_view title) {
  return absl::StrCat(kHtmlHead, "<title>", Escape(title), "</title>\n", kHtmlStyle, "<body>\n");
}

std::string RenderHtml(const std::vector<TraceReport>& reports,
                       const std::vector<Finding>& findings, const std::vector<TraceError>& errors,
                       const AnalyzeOptions& options) {
  std::string out(kHtmlHead);
  absl::StrAppend(&out, "<title>gpuctl analyze: ", reports.size(), " trace",
                  reports.size() == 1 ? "" : "s", "</title>\n", kHtmlStyle);
  absl::StrAppend(&out, "<body>\n<header><h1>gpuctl analyze</h1><p class=\"note\">", reports.size(),
                  " trace(s) analysed, ", findings.size(), " finding(s), ", errors.size(),
                  " file(s) not read.</p><nav><a href=\"#summary\">summary</a> \xC2\xB7 <a "
                  "href=\"#heatmap\">GPU busy over time</a> \xC2\xB7 <a href=\"#steps\">step "
                  "time</a> \xC2\xB7 <a href=\"#top\">top kernels, copies, syncs</a> \xC2\xB7 <a "
                  "href=\"#findings\">findings</a></nav></header>\n");
  AppendHtmlSummary(&out, reports, findings);
  AppendHtmlRanks(&out, reports);
  absl::StrAppend(&out, "<section id=\"heatmap\"><h2>GPU busy over time</h2>\n");
  html::AppendHeatmap(&out, reports);
  absl::StrAppend(&out, "</section>\n");
  AppendHtmlSteps(&out, reports);
  absl::StrAppend(&out, "<section id=\"top\"><h2>Top kernels, copies and synchronize calls</h2>\n",
                  "<p class=\"note\">By total time, at most ", kTopOps,
                  " rows each; synchronize calls are host time.</p>\n");
  for (const TraceReport& r : reports) AppendHtmlTopTables(&out, r);
  absl::StrAppend(&out, "</section>\n");
  AppendHtmlOccupancy(&out, reports);
  AppendHtmlDeviceMemory(&out, reports);
  AppendHtmlFindings(&out, reports, findings);
  AppendHtmlErrorsAndOptions(&out, errors, options);
  absl::StrAppend(&out, "</body>\n</html>\n");
  return out;
}

}  // namespace gpuctl::analysis
