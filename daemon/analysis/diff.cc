#include "daemon/analysis/diff.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "daemon/analysis/units.h"
#include "nlohmann/json.hpp"

namespace gpuctl::analysis {
namespace {

using Json = nlohmann::json;

double Ratio(int64_t after, int64_t before) {
  return before > 0 && after > 0 ? static_cast<double>(after) / static_cast<double>(before) : 0;
}

// Larger first by `key`, ties by name; the first `top` kept, the total
// counted.
template <typename Key>
void RankAndCut(std::vector<KernelChange>& changes, size_t top, size_t& total, Key key) {
  total = changes.size();
  std::sort(changes.begin(), changes.end(), [&](const KernelChange& a, const KernelChange& b) {
    const int64_t ka = key(a), kb = key(b);
    return ka != kb ? ka > kb : a.name < b.name;
  });
  if (changes.size() > top) changes.resize(top);
}

// The findings of `side` whose id `other` lacks, data quality first, then
// by recoverable time.
std::vector<Finding> OnlyIn(const std::vector<TraceReport>& side,
                            const std::vector<TraceReport>& other) {
  std::set<std::string> other_ids;
  for (const TraceReport& r : other) {
    for (const Finding& f : r.findings) other_ids.insert(f.id);
  }
  std::vector<Finding> out;
  for (const Finding& f : RankFindings(side)) {
    if (other_ids.count(f.id) == 0) out.push_back(f);
  }
  return out;
}

std::string Label(const std::string& text, size_t width) {
  return text.size() <= width ? text : absl::StrCat(text.substr(0, width - 1), "~");
}

// `text` cut from the front to `width` bytes, marked with "~": a path keeps
// its file name.
std::string LabelTail(const std::string& text, size_t width) {
  return text.size() <= width ? text : absl::StrCat("~", text.substr(text.size() - (width - 1)));
}

std::string Mean(int64_t ns, uint64_t count) {
  return count > 0 ? FormatNs(ns / static_cast<int64_t>(count)) : "-";
}

std::string Signed(int64_t ns) {
  return absl::StrCat(ns < 0 ? "-" : "+", FormatNs(std::llabs(ns)));
}

void AppendKernels(std::string* out, const std::vector<KernelChange>& list, size_t total,
                   const std::string& title, size_t columns) {
  if (list.empty()) return;
  absl::StrAppend(
      out, "\n", title,
      total > list.size() ? absl::StrCat(" (top ", list.size(), " of ", total, ")") : "", ":\n");
  absl::StrAppend(out, absl::StrFormat("  %-10s %-20s %-20s %-21s %s\n", "CHANGE", "BEFORE",
                                       "AFTER", "MEAN BEFORE -> AFTER", "KERNEL"));
  // The columns before the name take 2 + 11 + 21 + 21 + 22 = 77.
  const size_t name_width = columns > 77 + 8 ? columns - 77 : 8;
  for (const KernelChange& k : list) {
    const std::string before =
        k.count_before > 0 ? absl::StrCat(FormatNs(k.ns_before), " x", k.count_before) : "-";
    const std::string after =
        k.count_after > 0 ? absl::StrCat(FormatNs(k.ns_after), " x", k.count_after) : "-";
    const std::string mean =
        absl::StrCat(Mean(k.ns_before, k.count_before), " -> ", Mean(k.ns_after, k.count_after));
    absl::StrAppend(out, absl::StrFormat("  %-10s %-20s %-20s %-21s %s\n", Signed(k.delta_ns()),
                                         Label(before, 20), Label(after, 20), Label(mean, 21),
                                         Label(k.name, name_width)));
  }
}

// Appends `text` word-wrapped to `columns`, the first line led by `first`,
// the others by `indent`; a word longer than a line is cut.
void AppendWrapped(std::string* out, const std::string& first, const std::string& indent,
                   absl::string_view text, size_t columns) {
  std::string line = first;
  // Whether `line` wants no space before its next word.
  bool empty = first.empty() || first.back() == ' ';
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    const std::string w = Label(std::string(word), columns - indent.size());
    if (!empty && line.size() + 1 + w.size() > columns) {
      absl::StrAppend(out, line, "\n");
      line = indent;
      empty = true;
    }
    absl::StrAppend(&line, empty ? "" : " ", w);
    empty = false;
  }
  if (!empty) absl::StrAppend(out, line, "\n");
}

void AppendFindings(std::string* out, const std::vector<Finding>& findings,
                    const std::string& title, size_t columns) {
  if (findings.empty()) return;
  absl::StrAppend(out, "\n", title, ":\n");
  for (const Finding& f : findings) {
    const std::string lead =
        f.recoverable_ns > 0 ? absl::StrCat("  ", FormatNs(f.recoverable_ns), "  ") : "  ";
    AppendWrapped(out, absl::StrCat(lead, "[", f.id, "]"), "    ", f.title, columns);
    if (!f.advice.empty()) AppendWrapped(out, "    ", "    ", f.advice, columns);
  }
}

Json KernelsJson(const std::vector<KernelChange>& list) {
  Json out = Json::array();
  for (const KernelChange& k : list) {
    out.push_back({{"name", k.name},
                   {"count_before", k.count_before},
                   {"count_after", k.count_after},
                   {"ns_before", k.ns_before},
                   {"ns_after", k.ns_after},
                   {"delta_ns", k.delta_ns()}});
  }
  return out;
}

Json FindingsJson(const std::vector<Finding>& findings) {
  Json out = Json::array();
  for (const Finding& f : findings) {
    out.push_back({{"id", f.id},
                   {"trace", f.trace},
                   {"rank", f.rank},
                   {"recoverable_ns", f.recoverable_ns},
                   {"title", f.title},
                   {"advice", f.advice}});
  }
  return out;
}

}  // namespace

TraceSetDiff DiffTraceSets(const std::vector<TraceReport>& before,
                           const std::vector<TraceReport>& after, size_t top) {
  TraceSetDiff d;
  d.before = SummarizeSet(before);
  d.after = SummarizeSet(after);
  d.step_p50_ratio = Ratio(d.after.steps.p50, d.before.steps.p50);
  d.step_p99_ratio = Ratio(d.after.steps.p99, d.before.steps.p99);
  std::map<std::string, KernelChange> by_name;
  for (const OpTotals& k : d.before.kernels) {
    KernelChange& c = by_name[k.name];
    c.name = k.name;
    c.count_before = k.count;
    c.ns_before = k.total_ns;
  }
  for (const OpTotals& k : d.after.kernels) {
    KernelChange& c = by_name[k.name];
    c.name = k.name;
    c.count_after = k.count;
    c.ns_after = k.total_ns;
  }
  for (auto& [name, c] : by_name) {
    if (c.count_before == 0) {
      d.appeared.push_back(std::move(c));
    } else if (c.count_after == 0) {
      d.disappeared.push_back(std::move(c));
    } else if (c.delta_ns() != 0) {
      d.changed.push_back(std::move(c));
    }
  }
  RankAndCut(d.changed, top, d.changed_total,
             [](const KernelChange& c) { return std::llabs(c.delta_ns()); });
  RankAndCut(d.appeared, top, d.appeared_total, [](const KernelChange& c) { return c.ns_after; });
  RankAndCut(d.disappeared, top, d.disappeared_total,
             [](const KernelChange& c) { return c.ns_before; });
  d.only_before = OnlyIn(before, after);
  d.only_after = OnlyIn(after, before);
  return d;
}

std::string RenderDiffText(const TraceSetDiff& d, const std::string& before_label,
                           const std::string& after_label, size_t columns) {
  columns = std::max<size_t>(columns, 80);
  std::string out;
  const size_t label_width = columns - 30;
  absl::StrAppend(&out, "Before: ", LabelTail(before_label, label_width), " (", d.before.processes,
                  d.before.processes == 1 ? " process)\n" : " processes)\n");
  absl::StrAppend(&out, "After:  ", LabelTail(after_label, label_width), " (", d.after.processes,
                  d.after.processes == 1 ? " process)\n" : " processes)\n\n");
  auto step_line = [&](const char* name, int64_t b, int64_t a, double ratio) {
    const std::string r = ratio > 0 ? absl::StrFormat("x%.2f", ratio) : "-";
    absl::StrAppend(&out, absl::StrFormat("  step %-4s %12s -> %-12s %s\n", name,
                                          b > 0 ? FormatNs(b) : "-", a > 0 ? FormatNs(a) : "-", r));
  };
  absl::StrAppend(&out, "Step time (whole steps: ", d.before.steps.count, " before, ",
                  d.after.steps.count, " after):\n");
  step_line("p50", d.before.steps.p50, d.after.steps.p50, d.step_p50_ratio);
  step_line("p99", d.before.steps.p99, d.after.steps.p99, d.step_p99_ratio);
  absl::StrAppend(
      &out, absl::StrFormat("GPU busy %.1f%% -> %.1f%% (%+.1f points), idle %.1f%% -> %.1f%%; "
                            "GPU span %s -> %s\n",
                            100 * d.before.busy_share(), 100 * d.after.busy_share(),
                            100 * (d.after.busy_share() - d.before.busy_share()),
                            100 * d.before.idle_share(), 100 * d.after.idle_share(),
                            FormatNs(d.before.gpu_span_ns), FormatNs(d.after.gpu_span_ns)));
  AppendKernels(&out, d.changed, d.changed_total, "Kernels whose total time changed", columns);
  AppendKernels(&out, d.appeared, d.appeared_total, "Kernels that appeared", columns);
  AppendKernels(&out, d.disappeared, d.disappeared_total, "Kernels that disappeared", columns);
  AppendFindings(&out, d.only_after, "Findings only after", columns);
  AppendFindings(&out, d.only_before, "Findings only before (gone after)", columns);
  return out;
}

std::string RenderDiffJson(const TraceSetDiff& d, const std::string& before_label,
                           const std::string& after_label) {
  Json doc = {
      {"schema", "gpuctl.analyze.diff/1"},
      {"before", {{"input", before_label}, {"summary", Json::parse(RenderSetJson(d.before, 0))}}},
      {"after", {{"input", after_label}, {"summary", Json::parse(RenderSetJson(d.after, 0))}}},
      {"step_p50_ratio", d.step_p50_ratio},
      {"step_p99_ratio", d.step_p99_ratio},
      {"busy_pct_shift", 100 * (d.after.busy_share() - d.before.busy_share())},
      {"idle_pct_shift", 100 * (d.after.idle_share() - d.before.idle_share())},
      {"kernels",
       {{"changed", KernelsJson(d.changed)},
        {"changed_total", d.changed_total},
        {"appeared", KernelsJson(d.appeared)},
        {"appeared_total", d.appeared_total},
        {"disappeared", KernelsJson(d.disappeared)},
        {"disappeared_total", d.disappeared_total}}},
      {"findings_only_before", FindingsJson(d.only_before)},
      {"findings_only_after", FindingsJson(d.only_after)}};
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace gpuctl::analysis
