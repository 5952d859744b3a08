#include "daemon/analysis/communication.h"

#include <string>
#include <vector>

#include "daemon/analysis/analyze.h"
#include "daemon/analysis/report.h"
#include "daemon/analysis/testing/trace_builder.h"
#include "daemon/analysis/trace_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::analysis::communication_test {
namespace {

using ::gpuctl::analysis::testing::TraceBuilder;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kUs = 1000;
constexpr int64_t kSec = 1'000'000'000;
constexpr char kAllReduce[] = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage)";

// One rank of a data-parallel step loop: per step a `compute_us` gemm, then
// an all-reduce that starts when the gemm ends and finishes for every rank
// at 800 µs into the step (so a rank that computes 700 µs transfers for
// 100 µs and the others wait for it). `base_ns` moves the file's ts axis
// (another host's base time) without moving the events in Unix time.
struct RankSpec {
  int64_t rank = 0;
  int64_t compute_us = 500;
  int64_t step_us = 900;
  int64_t base_ns = 0;
  int extra_collectives = 0;
  std::string trace_id{"0190c0de-0000-7000-8000-000000000001"};
};

std::string RankTrace(const RankSpec& s) {
  TraceBuilder b;
  b.Gpuctl({.rank = s.rank,
            .window_start_ns = 0,
            .window_end_ns = 10 * kSec,
            .trace_id = s.trace_id,
            .base_time_ns = s.base_ns});
  for (int step = 0; step < 4; ++step) {
    const int64_t t0 = 100 * kUs + int64_t{step} * 1000 * kUs - s.base_ns;
    b.Step(step, t0 - 50 * kUs, s.step_us * kUs);
    b.Runtime("cudaLaunchKernel", t0 - 20 * kUs, 5 * kUs, 10 + 2 * step);
    b.Kernel("gemm", t0, s.compute_us * kUs, 10 + 2 * step);
    b.Runtime("cudaLaunchKernel", t0 - 10 * kUs, 5 * kUs, 11 + 2 * step);
    b.Kernel(kAllReduce, t0 + s.compute_us * kUs, (800 - s.compute_us) * kUs, 11 + 2 * step, 9);
  }
  for (int i = 0; i < s.extra_collectives; ++i) {
    b.Kernel(kAllReduce, 5000 * kUs + int64_t{i} * 100 * kUs - s.base_ns, 50 * kUs, 90 + i, 9);
  }
  return b.Json();
}

std::vector<TraceReport> AnalyzeRankSet(const std::vector<RankSpec>& specs,
                                        const AnalyzeOptions& options = {}) {
  std::vector<TraceReport> reports;
  for (const RankSpec& s : specs) {
    absl::StatusOr<TraceModel> model =
        ReadTraceBytes(RankTrace(s), "rank" + std::to_string(s.rank) + ".json");
    EXPECT_TRUE(model.ok()) << model.status();
    if (model.ok()) reports.push_back(AnalyzeModel(*model, options));
  }
  AnalyzeRanks(reports, options);
  return reports;
}

const Finding* FindIn(const TraceReport& r, const std::string& id) {
  for (const Finding& f : r.findings) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

double NumberOf(const Finding& f, const std::string& name) {
  for (const auto& [n, v] : f.numbers) {
    if (n == name) return v;
  }
  ADD_FAILURE() << "no number " << name << " in " << f.id;
  return -1;
}

// Rank 2 computes 700 µs against the others' 500 µs, and its steps take
// 1 ms against 900 µs; rank 1's host clock base is 1 s off.
std::vector<RankSpec> StragglerRanks() {
  return {{.rank = 0},
          {.rank = 1, .base_ns = 1 * kSec},
          {.rank = 2, .compute_us = 700, .step_us = 1000}};
}

TEST(CommunicationTest, PerProcessNcclTimeAndOverlap) {
  std::vector<TraceReport> reports = AnalyzeRankSet({{.rank = 0}});
  ASSERT_EQ(reports.size(), 1u);
  const CommunicationReport& c = reports[0].communication;
  EXPECT_EQ(c.kernels, 4u);
  EXPECT_EQ(c.nccl_ns, int64_t{4} * 300 * kUs);
  EXPECT_EQ(c.overlapped_ns, 0);
  // Four whole steps of 900 µs, each with 300 µs of NCCL time alone.
  EXPECT_EQ(c.step_ns, int64_t{4} * 900 * kUs);
  EXPECT_EQ(c.step_exposed_ns, int64_t{4} * 300 * kUs);
  // One file: nothing to compare.
  EXPECT_EQ(c.across.ranks, 0u);
}

TEST(CommunicationTest, TransferWaitingAndLatenessAcrossRanks) {
  std::vector<TraceReport> reports = AnalyzeRankSet(StragglerRanks());
  ASSERT_EQ(reports.size(), 3u);
  const RankCommunication& r0 = reports[0].communication.across;
  const RankCommunication& r1 = reports[1].communication.across;
  const RankCommunication& r2 = reports[2].communication.across;
  EXPECT_EQ(r0.ranks, 3u);
  EXPECT_EQ(r0.matched, 4u);
  EXPECT_EQ(r0.unmatched, 0u);
  // The shortest all-reduce (rank 2's 100 µs) is the transfer.
  EXPECT_EQ(r0.transfer_ns, int64_t{4} * 100 * kUs);
  EXPECT_EQ(r0.waiting_ns, int64_t{4} * 200 * kUs);
  EXPECT_EQ(r1.waiting_ns, int64_t{4} * 200 * kUs);  // its base time does not shift it
  EXPECT_EQ(r2.transfer_ns, int64_t{4} * 100 * kUs);
  EXPECT_EQ(r2.waiting_ns, 0);
  EXPECT_EQ(r0.lateness_ns.p50, 0);
  EXPECT_EQ(r1.lateness_ns.p50, 0);
  EXPECT_EQ(r2.lateness_ns.p50, 200 * kUs);
  EXPECT_EQ(r0.arrival_spread_ns.count, 4u);
  EXPECT_EQ(r0.arrival_spread_ns.p50, 200 * kUs);
  EXPECT_EQ(r2.step_median_ns, 900 * kUs);
  EXPECT_EQ(r2.step_mad_ns, 0);
  EXPECT_FALSE(r0.step_straggler || r0.arrival_straggler);
  EXPECT_FALSE(r1.step_straggler || r1.arrival_straggler);
  EXPECT_TRUE(r2.step_straggler);
  EXPECT_TRUE(r2.arrival_straggler);
  // The matching input is freed once compared.
  EXPECT_TRUE(reports[0].communication.collectives.empty());
}

TEST(CommunicationTest, FindingsNameTheStragglerWithRecoverableTime) {
  std::vector<TraceReport> reports = AnalyzeRankSet(StragglerRanks());
  ASSERT_EQ(reports.size(), 3u);
  const Finding* waiting = FindIn(reports[0], "communication_waiting");
  ASSERT_NE(waiting, nullptr);
  EXPECT_EQ(waiting->rank, 0);
  EXPECT_EQ(waiting->recoverable_ns, 800 * kUs);
  EXPECT_EQ(NumberOf(*waiting, "latest_rank"), 2);
  EXPECT_THAT(waiting->advice, HasSubstr("rank 2 arrives last (median 200 us"));
  EXPECT_EQ(FindIn(reports[1], "communication_waiting"), nullptr);  // one per trace

  const Finding* step = FindIn(reports[2], "straggler_step");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->recoverable_ns, int64_t{4} * 100 * kUs);
  EXPECT_EQ(NumberOf(*step, "excess_per_step_ns"), 100 * kUs);
  EXPECT_THAT(step->title, HasSubstr("Median step 1.00 ms, 100 us (11.1%) over the 3 ranks'"));
  const Finding* arrival = FindIn(reports[2], "straggler_arrival");
  ASSERT_NE(arrival, nullptr);
  EXPECT_EQ(arrival->recoverable_ns, int64_t{4} * 200 * kUs);
  for (const TraceReport& r : {reports[0], reports[1]}) {
    EXPECT_EQ(FindIn(r, "straggler_step"), nullptr);
    EXPECT_EQ(FindIn(r, "straggler_arrival"), nullptr);
  }
}

TEST(CommunicationTest, EqualRanksHaveNoStragglerAndNoWaiting) {
  std::vector<TraceReport> reports = AnalyzeRankSet({{.rank = 0}, {.rank = 1}, {.rank = 2}});
  ASSERT_EQ(reports.size(), 3u);
  for (const TraceReport& r : reports) {
    EXPECT_EQ(r.communication.across.ranks, 3u);
    EXPECT_EQ(r.communication.across.waiting_ns, 0);
    EXPECT_FALSE(r.communication.across.step_straggler);
    EXPECT_FALSE(r.communication.across.arrival_straggler);
    for (const char* id : {"communication_waiting", "straggler_step", "straggler_arrival"}) {
      EXPECT_EQ(FindIn(r, id), nullptr) << id;
    }
  }
}

TEST(CommunicationTest, ThresholdsDecideTheStragglers) {
  // 100 µs over a 900 µs median is 11%: under a 20% margin nobody is one.
  AnalyzeOptions margin;
  margin.straggler_share = 0.2;
  std::vector<TraceReport> reports = AnalyzeRankSet(StragglerRanks(), margin);
  EXPECT_FALSE(reports[2].communication.across.step_straggler);
  EXPECT_TRUE(reports[2].communication.across.arrival_straggler);  // 200 µs is 22%
  // Waiting is 66.7% of rank 0's NCCL time.
  AnalyzeOptions waiting;
  waiting.comm_wait_share = 0.7;
  reports = AnalyzeRankSet(StragglerRanks(), waiting);
  EXPECT_EQ(FindIn(reports[0], "communication_waiting"), nullptr);
}

TEST(CommunicationTest, StragglerRuleNeedsMadsAndMargin) {
  EXPECT_FALSE(IsStraggler(110, 100, 5, 3, 0));  // 10 is not over 3 x 5
  EXPECT_TRUE(IsStraggler(110, 100, 3, 3, 0));
  EXPECT_FALSE(IsStraggler(110, 100, 0, 3, 20));  // under the margin
  EXPECT_FALSE(IsStraggler(100, 100, 0, 3, 0));   // equal is never one
}

TEST(CommunicationTest, UnequalCountsMatchTheFirstAndCountTheRest) {
  std::vector<TraceReport> reports =
      AnalyzeRankSet({{.rank = 0}, {.rank = 1, .extra_collectives = 3}});
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].communication.across.matched, 4u);
  EXPECT_EQ(reports[0].communication.across.unmatched, 0u);
  EXPECT_EQ(reports[1].communication.across.matched, 4u);
  EXPECT_EQ(reports[1].communication.across.unmatched, 3u);
  EXPECT_EQ(reports[1].communication.across.waiting_ns, 0);
}

TEST(CommunicationTest, OnlyRanksOfOneTraceAreCompared) {
  std::vector<TraceReport> reports = AnalyzeRankSet(
      {{.rank = 0}, {.rank = 1, .trace_id = "0190c0de-0000-7000-8000-000000000002"}});
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].communication.across.ranks, 0u);
  EXPECT_EQ(reports[1].communication.across.ranks, 0u);
  // The same rank twice is not a set of ranks either.
  reports = AnalyzeRankSet({{.rank = 0}, {.rank = 0}});
  EXPECT_EQ(reports[0].communication.across.ranks, 0u);
}

TEST(CommunicationTest, TextJsonAndHtmlShowTheRanks) {
  std::vector<TraceReport> reports = AnalyzeRankSet(StragglerRanks());
  const std::vector<Finding> ranked = RankFindings(reports);
  const std::string text = RenderText(reports, ranked, 100);
  EXPECT_THAT(text, HasSubstr("COMMUNICATION ACROSS RANKS (trace 0190c0de-0000-7000-8000-"
                              "000000000001)\n3 ranks, 4 collectives matched, arrival spread "
                              "p50 200 us p99 200 us\n"));
  EXPECT_THAT(text, HasSubstr("    0   1.20 ms     0.0%    400 us    800 us      0 ns    900 us"
                              "         0  -\n"));
  EXPECT_THAT(text, HasSubstr("    2    400 us     0.0%    400 us      0 ns    200 us   1.00 ms"
                              "         0  step, arrival\n"));
  EXPECT_THAT(text, HasSubstr("straggler_arrival [rank 2] recoverable ~800 us"));

  nlohmann::json doc = nlohmann::json::parse(RenderJson(reports, ranked, {}, AnalyzeOptions{}));
  const nlohmann::json& across = doc["traces"][2]["communication"]["across_ranks"];
  EXPECT_EQ(across["lateness_ns"]["p50"], 200 * kUs);
  EXPECT_EQ(across["transfer_ns"], 400 * kUs);
  EXPECT_EQ(across["step_straggler"], true);
  EXPECT_EQ(doc["traces"][0]["communication"]["across_ranks"]["waiting_ns"], 800 * kUs);
  EXPECT_EQ(doc["options"]["straggler_mad"], 3);

  const std::string html = RenderHtml(reports, ranked, {}, AnalyzeOptions{});
  EXPECT_THAT(html, HasSubstr("<section id=\"ranks\">"));
  EXPECT_THAT(html, HasSubstr("<tr class=\"rank-row\" data-rank=\"0\""));
  EXPECT_THAT(html, HasSubstr("<td class=\"waiting\" data-ns=\"800000\">800 us</td>"));

  std::vector<TraceReport> one = AnalyzeRankSet({{.rank = 0}});
  EXPECT_THAT(RenderText(one, RankFindings(one), 100), Not(HasSubstr("ACROSS RANKS")));
  EXPECT_THAT(RenderHtml(one, {}, {}, AnalyzeOptions{}), Not(HasSubstr("id=\"ranks\"")));
}

}  // namespace
}  // namespace gpuctl::analysis::communication_test
