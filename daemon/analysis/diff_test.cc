// The before/after comparison of `gpuctl analyze --diff`, over hand-built
// traces whose kernels, steps and findings are known.
#include "daemon/analysis/diff.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "daemon/analysis/analyze.h"
#include "daemon/analysis/testing/trace_builder.h"
#include "daemon/analysis/trace_reader.h"
#include "daemon/analysis/trace_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::analysis::diff_test {
namespace {

using ::testing::HasSubstr;
using testing::TraceBuilder;

constexpr int64_t kUs = 1000;

TraceReport Analyze(const std::string& json) {
  absl::StatusOr<TraceModel> model = ReadTraceBytes(json, "trace.json");
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  return AnalyzeModel(*model, {});
}

// Whole steps of the given lengths back to back from 0, each holding
// `gemms` gemm kernels of `gemm_us` and one "attn" of 50 µs, every kernel
// launched 20 µs ahead; the window ends 1 ms after the last step.
std::string Steps(int64_t rank, const std::vector<int64_t>& step_us, int gemms, int64_t gemm_us,
                  const std::string& extra_kernel = "") {
  TraceBuilder b;
  int64_t end = 0;
  for (int64_t us : step_us) end += us;
  b.Gpuctl({.rank = rank, .window_start_ns = 0, .window_end_ns = (end + 1000) * kUs});
  int64_t start = 0;
  uint64_t correlation = 0;
  auto kernel = [&](const std::string& name, int64_t at, int64_t dur) {
    b.Runtime("cudaLaunchKernel", at - 20 * kUs, 5 * kUs, ++correlation);
    b.Kernel(name, at, dur, correlation);
  };
  for (size_t i = 0; i < step_us.size(); ++i) {
    b.Step(static_cast<int64_t>(i + 1), start * kUs, step_us[i] * kUs);
    int64_t at = (start + 30) * kUs;
    for (int g = 0; g < gemms; ++g, at += gemm_us * kUs) kernel("gemm", at, gemm_us * kUs);
    kernel("attn", at, 50 * kUs);
    if (!extra_kernel.empty()) kernel(extra_kernel, at + 50 * kUs, 10 * kUs);
    start += step_us[i];
  }
  return b.Json();
}

TEST(DiffTest, StepPercentilesPoolTheSidesProcessesAndRatiosCompareThem) {
  // Before: two ranks, steps 400 + 800 µs and 600 µs: pooled 400, 600, 800.
  // After: one rank, steps 500 and 1500 µs.
  const std::vector<TraceReport> before = {Analyze(Steps(0, {400, 800}, 2, 100)),
                                           Analyze(Steps(1, {600}, 2, 100))};
  const std::vector<TraceReport> after = {Analyze(Steps(0, {500, 1500}, 2, 100))};
  const TraceSetDiff d = DiffTraceSets(before, after, 10);
  EXPECT_EQ(d.before.processes, 2u);
  EXPECT_EQ(d.before.steps.count, 3u);
  EXPECT_EQ(d.before.steps.p50, 600 * kUs);  // nearest rank: 2nd of 3
  EXPECT_EQ(d.before.steps.p99, 800 * kUs);
  EXPECT_EQ(d.after.steps.p50, 500 * kUs);
  EXPECT_EQ(d.after.steps.p99, 1500 * kUs);
  EXPECT_DOUBLE_EQ(d.step_p50_ratio, 500.0 / 600.0);
  EXPECT_DOUBLE_EQ(d.step_p99_ratio, 1500.0 / 800.0);
  // The same kernel names on both sides: none appeared or disappeared; their
  // totals follow the step counts (3 steps before, 2 after), gemm's most.
  ASSERT_EQ(d.changed.size(), 2u);
  EXPECT_EQ(d.changed[0].name, "gemm");
  EXPECT_EQ(d.changed[0].ns_before, int64_t{6} * 100 * kUs);
  EXPECT_EQ(d.changed[0].ns_after, int64_t{4} * 100 * kUs);
  EXPECT_EQ(d.changed[0].delta_ns(), -200 * kUs);
  EXPECT_EQ(d.changed[1].name, "attn");
  EXPECT_EQ(d.changed[1].count_before, 3u);
  EXPECT_EQ(d.changed[1].count_after, 2u);
  EXPECT_TRUE(d.appeared.empty());
  EXPECT_TRUE(d.disappeared.empty());
}

TEST(DiffTest, KernelsThatGotSlowerAppearedOrDisappearedAreRankedByTime) {
  // Before: gemm 2 x 100 µs per step, a 10 µs "old_copy_kernel"; after: gemm
  // 2 x 250 µs, a 10 µs "new_fused" in its place, same two steps.
  const std::vector<TraceReport> before = {
      Analyze(Steps(0, {1000, 1000}, 2, 100, "old_copy_kernel"))};
  const std::vector<TraceReport> after = {Analyze(Steps(0, {1000, 1000}, 2, 250, "new_fused"))};
  const TraceSetDiff d = DiffTraceSets(before, after, 10);
  ASSERT_EQ(d.changed.size(), 1u);  // attn is unchanged
  EXPECT_EQ(d.changed[0].name, "gemm");
  EXPECT_EQ(d.changed[0].ns_before, 400 * kUs);
  EXPECT_EQ(d.changed[0].ns_after, 1000 * kUs);
  EXPECT_EQ(d.changed[0].count_after, 4u);
  ASSERT_EQ(d.appeared.size(), 1u);
  EXPECT_EQ(d.appeared[0].name, "new_fused");
  EXPECT_EQ(d.appeared[0].ns_after, 20 * kUs);
  EXPECT_EQ(d.appeared[0].count_before, 0u);
  ASSERT_EQ(d.disappeared.size(), 1u);
  EXPECT_EQ(d.disappeared[0].name, "old_copy_kernel");
  EXPECT_EQ(d.disappeared[0].ns_before, 20 * kUs);
  // Busy: before 2 x (200 + 50 + 10) µs, after 2 x (500 + 50 + 10) µs.
  EXPECT_EQ(d.before.busy_ns, 520 * kUs);
  EXPECT_EQ(d.after.busy_ns, 1120 * kUs);

  const std::string text = RenderDiffText(d, "before/", "after/", 100);
  EXPECT_THAT(text, HasSubstr("Kernels whose total time changed"));
  EXPECT_THAT(text, HasSubstr("+600 us"));
  EXPECT_THAT(text, HasSubstr("new_fused"));
  EXPECT_THAT(text, HasSubstr("old_copy_kernel"));
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    EXPECT_LE(line.size(), 100u) << line;
  }
  const nlohmann::json doc = nlohmann::json::parse(RenderDiffJson(d, "before/", "after/"));
  EXPECT_EQ(doc["schema"], "gpuctl.analyze.diff/1");
  EXPECT_EQ(doc["before"]["input"], "before/");
  EXPECT_EQ(doc["kernels"]["changed"][0]["delta_ns"], 600 * kUs);
  EXPECT_EQ(doc["kernels"]["appeared"][0]["name"], "new_fused");
  EXPECT_EQ(doc["kernels"]["disappeared_total"], 1);
  EXPECT_EQ(doc["before"]["summary"]["steps"]["p50_ns"], 1000 * kUs);
}

TEST(DiffTest, TopCutsEachListAndCountsWhatWasCut) {
  std::vector<TraceReport> before = {Analyze(Steps(0, {1000}, 1, 100))};
  TraceBuilder b;
  b.Gpuctl({.window_start_ns = 0, .window_end_ns = 10'000 * kUs});
  for (int i = 0; i < 5; ++i) {
    b.Kernel("k" + std::to_string(i), int64_t{i} * 1000 * kUs, int64_t{i + 1} * 10 * kUs, i + 1);
  }
  const TraceSetDiff d = DiffTraceSets(before, {Analyze(b.Json())}, 2);
  EXPECT_EQ(d.appeared_total, 5u);
  ASSERT_EQ(d.appeared.size(), 2u);
  EXPECT_EQ(d.appeared[0].name, "k4");  // 50 µs, the most
  EXPECT_EQ(d.appeared[1].name, "k3");
  EXPECT_EQ(d.disappeared_total, 2u);  // gemm and attn
}

// Two 100 µs kernels with 500 µs of idle GPU between them while the host
// sits in the data loader: a host-bound finding the clean side lacks.
TEST(DiffTest, FindingsOnOneSideOnlyAreListedByKind) {
  TraceBuilder b;
  b.Gpuctl({.window_start_ns = 0, .window_end_ns = 2000 * kUs});
  b.Runtime("cudaLaunchKernel", 0, 5 * kUs, 1);
  b.Kernel("gemm", 10 * kUs, 100 * kUs, 1);
  b.Range("DataLoader.__next__", 110 * kUs, 480 * kUs);
  b.Runtime("cudaLaunchKernel", 600 * kUs, 5 * kUs, 2);
  b.Kernel("gemm", 610 * kUs, 100 * kUs, 2);
  const TraceReport host_bound = Analyze(b.Json());
  const TraceReport clean = Analyze(Steps(0, {1000}, 2, 100));
  ASSERT_TRUE(clean.findings.empty());
  std::vector<std::string> host_bound_ids;
  for (const Finding& f : host_bound.findings) host_bound_ids.push_back(f.id);
  ASSERT_THAT(host_bound_ids, ::testing::Contains("host_bound_idle"));

  const TraceSetDiff d = DiffTraceSets({clean}, {host_bound}, 10);
  EXPECT_TRUE(d.only_before.empty());
  ASSERT_EQ(d.only_after.size(), host_bound.findings.size());
  bool seen = false;
  for (const Finding& f : d.only_after) seen |= f.id == "host_bound_idle";
  EXPECT_TRUE(seen);
  // The same finding on both sides is in neither list.
  const TraceSetDiff same = DiffTraceSets({host_bound}, {host_bound}, 10);
  EXPECT_TRUE(same.only_before.empty());
  EXPECT_TRUE(same.only_after.empty());
  EXPECT_THAT(RenderDiffText(d, "a", "b"), HasSubstr("[host_bound_idle]"));
}

TEST(DiffTest, HtmlShowsTheShiftsKernelsAndOneSideFindings) {
  const std::vector<TraceReport> before = {
      Analyze(Steps(0, {1000, 1000}, 2, 100, "old_copy_kernel"))};
  const std::vector<TraceReport> after = {Analyze(Steps(0, {1000, 1200}, 2, 250, "<b>new</b>"))};
  const TraceSetDiff d = DiffTraceSets(before, after, 10);
  const std::string html = RenderDiffHtml(d, "before/<x>", "after/");
  EXPECT_THAT(html, HasSubstr("default-src 'none'"));
  EXPECT_THAT(html, HasSubstr("<span id=\"before\">before/&lt;x&gt;</span>"));
  // p99: 1000 -> 1200 µs.
  EXPECT_THAT(html, HasSubstr("<tr class=\"diff-step\" data-pct=\"p99\"><td>step p99</td>"
                              "<td class=\"before\" data-ns=\"1000000\">1.00 ms</td>"
                              "<td class=\"after\" data-ns=\"1200000\">1.20 ms</td>"
                              "<td class=\"ratio\" data-ratio=\"1.2000\">x1.20</td></tr>"));
  EXPECT_THAT(html, HasSubstr("class=\"step-shift-bar after\" data-side=\"after\" "
                              "data-ns=\"1200000\""));
  EXPECT_THAT(html, HasSubstr("<td class=\"delta\" data-ns=\"600000\">+600 us</td>"));
  EXPECT_THAT(html, HasSubstr("data-kind=\"appeared\" data-total=\"1\""));
  EXPECT_THAT(html, HasSubstr("<td class=\"name\">&lt;b&gt;new&lt;/b&gt;</td>"));
  EXPECT_THAT(html, ::testing::Not(HasSubstr("<b>new")));
  EXPECT_THAT(html, HasSubstr("<p class=\"note none\" data-side=\"before\">none</p>"));
}

}  // namespace
}  // namespace gpuctl::analysis::diff_test
