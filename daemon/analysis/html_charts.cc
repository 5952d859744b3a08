// RenderHtml's pieces (html_writer.h): escaping and the inline SVG charts.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/analysis/html_writer.h"
#include "daemon/analysis/units.h"

namespace gpuctl::analysis::html {
namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the valid UTF-8 sequence at text[i] (a byte >= 0x80), or 0.
size_t Utf8SequenceLength(absl::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > text.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

// Light (idle) to dark blue (busy).
std::string BusyColour(double fraction) {
  const double f = std::clamp(fraction, 0.0, 1.0);
  auto mix = [f](int idle, int busy) { return std::lround(idle + (busy - idle) * f); };
  return absl::StrFormat("#%02x%02x%02x", mix(240, 8), mix(244, 48), mix(248, 107));
}

// Chart geometry, in SVG user units (= CSS pixels at width 100%).
constexpr double kLabelWidth = 150, kPlotWidth = 820, kChartWidth = 990;
constexpr double kRowHeight = 20, kRowGap = 4, kTop = 8, kAxisHeight = 30;
constexpr double kBarsHeight = 160, kBarsLeft = 70;

std::string Px(double v) { return absl::StrFormat("%.2f", v); }

}  // namespace

std::string Escape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t n = Utf8SequenceLength(text, i);
      if (n == 0) {
        out += kReplacement;
        ++i;
      } else {
        out.append(text.data() + i, n);
        i += n;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7F) {
          out += kReplacement;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::string BaseName(absl::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  const size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

std::string TraceLabel(const TraceReport& report) {
  if (report.info.rank >= 0) return absl::StrCat("rank ", report.info.rank);
  return BaseName(report.info.path);
}

void AppendHeatmap(std::string* out, const std::vector<TraceReport>& reports) {
  std::vector<const TraceReport*> rows;
  for (const TraceReport& r : reports) {
    if (!r.breakdown.timeline.busy_ns.empty()) rows.push_back(&r);
  }
  if (rows.empty()) {
    absl::StrAppend(out, "<p class=\"empty\">No GPU activity to show.</p>\n");
    return;
  }
  // Absolute times (base + ts): the ranks of one trace share the clock. The
  // base comes from the file, so the sums are taken wide; a timeline is at
  // most a bounded window long, and so is an axis whose rows all overlap.
  const auto start_of = [](const TraceReport* r) {
    return absl::int128(r->info.base_time_ns) + r->breakdown.timeline.start_ns;
  };
  absl::int128 lo = start_of(rows[0]), hi = lo, latest_start = lo, earliest_end = 0;
  int64_t longest = 0;
  for (const TraceReport* r : rows) {
    const BusyTimeline& t = r->breakdown.timeline;
    const absl::int128 a = start_of(r), b = a + (t.end_ns - t.start_ns);
    earliest_end = r == rows[0] ? b : std::min(earliest_end, b);
    lo = std::min(lo, a);
    hi = std::max(hi, b);
    latest_start = std::max(latest_start, a);
    longest = std::max(longest, t.end_ns - t.start_ns);
  }
  const bool shared = latest_start < earliest_end && hi - lo <= 2 * absl::int128(longest);
  const int64_t axis_ns = shared ? static_cast<int64_t>(hi - lo) : longest;
  const double scale = kPlotWidth / static_cast<double>(axis_ns);
  absl::StrAppend(out, "<p class=\"caption\">",
                  shared ? "One time axis for every row (the traces' base time plus ts); 0 is "
                           "the earliest window start."
                         : "The windows do not overlap: each row spans its own window, 0 being "
                           "its start.",
                  " Each cell is one bucket of the capture window (the GPU span when the window "
                  "is unknown); its colour is the share of the bucket in which any GPU op ran, "
                  "all devices of the process as one.</p>\n");
  const double height =
      kTop + static_cast<double>(rows.size()) * (kRowHeight + kRowGap) + kAxisHeight;
  absl::StrAppend(out, "<svg id=\"heatmap-svg\" class=\"heatmap\" viewBox=\"0 0 ", Px(kChartWidth),
                  " ", Px(height), "\" width=\"", Px(kChartWidth), "\" height=\"", Px(height),
                  "\" shape-rendering=\"crispEdges\" role=\"img\" "
                  "aria-label=\"GPU busy share per rank over time\">\n");
  for (size_t i = 0; i < rows.size(); ++i) {
    const TraceReport& r = *rows[i];
    const BusyTimeline& t = r.breakdown.timeline;
    const int64_t origin = shared ? static_cast<int64_t>(start_of(&r) - lo) : 0;
    const double y = kTop + static_cast<double>(i) * (kRowHeight + kRowGap);
    absl::StrAppend(out, "<g class=\"heat-row\" data-rank=\"", r.info.rank, "\" data-file=\"",
                    Escape(r.info.path), "\" data-buckets=\"", t.busy_ns.size(), "\">");
    absl::StrAppend(out, "<text class=\"row-label\" x=\"4\" y=\"", Px(y + kRowHeight - 6), "\">",
                    Escape(TraceLabel(r)), "<title>", Escape(r.info.path), "</title></text>\n");
    for (size_t b = 0; b < t.busy_ns.size(); ++b) {
      const int64_t from = static_cast<int64_t>(b) * t.bucket_ns;
      const int64_t len = t.BucketEnd(b) - t.start_ns - from;
      const double fraction =
          len > 0 ? static_cast<double>(t.busy_ns[b]) / static_cast<double>(len) : 0;
      absl::StrAppend(out, "<rect class=\"heat-cell\" x=\"",
                      Px(kLabelWidth + static_cast<double>(origin + from) * scale), "\" y=\"",
                      Px(y), "\" width=\"", Px(static_cast<double>(len) * scale), "\" height=\"",
                      Px(kRowHeight), "\" fill=\"", BusyColour(fraction), "\" data-busy-pct=\"",
                      absl::StrFormat("%.1f", 100 * fraction), "\"><title>", Escape(TraceLabel(r)),
                      " +", FormatNs(from), " to +", FormatNs(from + len), ": ",
                      absl::StrFormat("%.1f%%", 100 * fraction), " busy</title></rect>");
    }
    absl::StrAppend(out, "</g>\n");
  }
  const double axis_y = height - kAxisHeight;
  for (int k = 0; k <= 4; ++k) {
    const double x = kLabelWidth + kPlotWidth * k / 4;
    absl::StrAppend(out, "<line class=\"tick\" x1=\"", Px(x), "\" x2=\"", Px(x), "\" y1=\"",
                    Px(axis_y), "\" y2=\"", Px(axis_y + 5), "\"/><text class=\"tick-label\" x=\"",
                    Px(x), "\" y=\"", Px(axis_y + 18), "\" text-anchor=\"",
                    k == 0 ? "start" : (k == 4 ? "end" : "middle"), "\">+",
                    FormatNs(axis_ns * k / 4), "</text>\n");
  }
  absl::StrAppend(out, "</svg>\n<p class=\"legend\">idle");
  for (int k = 0; k <= 4; ++k) {
    absl::StrAppend(out, " <span class=\"swatch\" style=\"background:", BusyColour(k / 4.0),
                    "\"></span>");
  }
  absl::StrAppend(out, " busy</p>\n");
}

void AppendStepBars(std::string* out, const TraceReport& report) {
  const std::vector<StepTimes>& steps = report.breakdown.steps;
  const size_t n = std::min(steps.size(), kMaxStepBars);
  if (n == 0) {
    absl::StrAppend(out, "<p class=\"empty\">No ProfilerStep ranges in this trace.</p>\n");
    return;
  }
  int64_t longest = 1;
  for (size_t i = 0; i < n; ++i) longest = std::max(longest, steps[i].end_ns - steps[i].start_ns);
  const double slot =
      std::clamp((kChartWidth - kBarsLeft - 10) / static_cast<double>(n), 2.0, 28.0);
  const double bar = slot > 6 ? slot - 2 : slot;
  const double bottom = kTop + kBarsHeight, height = bottom + kAxisHeight;
  absl::StrAppend(out, "<svg class=\"step-bars\" data-rank=\"", report.info.rank, "\" data-file=\"",
                  Escape(report.info.path), "\" data-steps=\"", n, "\" viewBox=\"0 0 ",
                  Px(kChartWidth), " ", Px(height), "\" width=\"", Px(kChartWidth), "\" height=\"",
                  Px(height), "\" role=\"img\" aria-label=\"Step times of ",
                  Escape(TraceLabel(report)), "\">\n");
  absl::StrAppend(out, "<text class=\"tick-label\" x=\"", Px(kBarsLeft - 6), "\" y=\"",
                  Px(kTop + 10), "\" text-anchor=\"end\">", FormatNs(longest),
                  "</text><text class=\"tick-label\" x=\"", Px(kBarsLeft - 6), "\" y=\"",
                  Px(bottom), "\" text-anchor=\"end\">0</text>\n");
  const double per_ns = kBarsHeight / static_cast<double>(longest);
  for (size_t i = 0; i < n; ++i) {
    const StepTimes& s = steps[i];
    const int64_t duration = s.end_ns - s.start_ns;
    const double x = kBarsLeft + static_cast<double>(i) * slot;
    absl::StrAppend(out, "<g class=\"step-bar", s.clipped ? " clipped" : "", "\" data-step=\"",
                    s.number, "\" data-duration-ns=\"", duration, "\"><title>step ", s.number, ": ",
                    FormatNs(duration), s.clipped ? " (cut by the window's end)" : "", "; compute ",
                    FormatNs(s.compute_ns), ", communication ", FormatNs(s.communication_ns),
                    ", memory ", FormatNs(s.memory_ns), ", idle ", FormatNs(s.idle_ns), "</title>");
    double y = bottom;
    const std::pair<const char*, int64_t> parts[] = {{"compute", s.compute_ns},
                                                     {"communication", s.communication_ns},
                                                     {"memory", s.memory_ns},
                                                     {"idle", s.idle_ns}};
    for (const auto& [cls, ns] : parts) {
      const double h = static_cast<double>(ns) * per_ns;
      y -= h;
      absl::StrAppend(out, "<rect class=\"seg seg-", cls, "\" data-ns=\"", ns, "\" x=\"", Px(x),
                      "\" y=\"", Px(y), "\" width=\"", Px(bar), "\" height=\"", Px(h), "\"/>");
    }
    absl::StrAppend(out, "</g>\n");
  }
  for (size_t i : {size_t{0}, n - 1}) {
    absl::StrAppend(out, "<text class=\"tick-label\" x=\"",
                    Px(kBarsLeft + static_cast<double>(i) * slot + bar / 2), "\" y=\"",
                    Px(bottom + 16), "\" text-anchor=\"middle\">", steps[i].number, "</text>\n");
    if (n == 1) break;
  }
  absl::StrAppend(out, "</svg>\n");
  if (steps.size() > n) {
    absl::StrAppend(out, "<p class=\"caption\">The first ", n, " of ", steps.size(),
                    " steps.</p>\n");
  }
}

}  // namespace gpuctl::analysis::html
