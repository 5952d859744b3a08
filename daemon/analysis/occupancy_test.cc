#include "daemon/analysis/occupancy.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/analysis/analyze.h"
#include "daemon/analysis/report.h"
#include "daemon/analysis/testing/trace_builder.h"
#include "daemon/analysis/trace_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::analysis::occupancy_test {
namespace {

using ::gpuctl::analysis::testing::TraceBuilder;
using ::testing::HasSubstr;

constexpr int64_t kUs = 1000;

struct Launch {
  double blocks_per_sm;
  int occupancy_pct;
  std::string grid, block;
  int registers;
};

// A kernel event with kineto's (and gpuctl's converter's) launch args.
std::string KernelWithArgs(const std::string& name, int64_t start_us, int64_t dur_us,
                           const Launch& l, uint64_t correlation) {
  return absl::StrFormat(
      R"({"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": 7, "ts": %d.000, )"
      R"("dur": %d.000, "args": {"device": 0, "stream": 7, "correlation": %d, )"
      R"("registers per thread": %d, "shared memory": 49152, "blocks per SM": %.6f, )"
      R"("warps per SM": 4.000000, "grid": %s, "block": %s, )"
      R"("est. achieved occupancy %%": %d}})",
      name, start_us, dur_us, correlation, l.registers, l.blocks_per_sm, l.grid, l.block,
      l.occupancy_pct);
}

// Back to back from 1 ms on GPU 0: 4 x 100 µs of a 66-block gemm (0.5
// blocks per SM, 12%), 2 x 200 µs at 4 blocks per SM (50%), 2 x 300 µs at
// 2 blocks per SM but 10% occupancy, a 100 µs NCCL kernel (0.1, 5%) and a
// 100 µs kernel with a grid but no occupancy figures.
std::string OccupancyTrace() {
  TraceBuilder b;
  b.Gpuctl({});
  const Launch small{0.5, 12, "[66, 1, 1]", "[256, 1, 1]", 128};
  const Launch big{4.0, 50, "[528, 1, 1]", "[128, 1, 1]", 64};
  const Launch low{2.0, 10, "[2, 3, 44]", "[32, 32, 1]", 255};
  const Launch nccl{0.1, 5, "[13, 1, 1]", "[512, 1, 1]", 96};
  int64_t t = 1000;
  uint64_t correlation = 1;
  for (int i = 0; i < 4; ++i, t += 100) {
    b.Raw(KernelWithArgs("small_gemm", t, 100, small, correlation++));
  }
  for (int i = 0; i < 2; ++i, t += 200)
    b.Raw(KernelWithArgs("big_gemm", t, 200, big, correlation++));
  for (int i = 0; i < 2; ++i, t += 300)
    b.Raw(KernelWithArgs("low_occ", t, 300, low, correlation++));
  b.Raw(KernelWithArgs("ncclDevKernel_AllReduce", t, 100, nccl, correlation++));
  b.Kernel("plain", (t + 100) * kUs, 100 * kUs, correlation);
  return b.Json();
}

TraceModel ReadModel(const std::string& json) {
  absl::StatusOr<TraceModel> model = ReadTraceBytes(json, "occupancy.json");
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : TraceModel{};
}

const Finding* FindId(const TraceReport& r, const std::string& id) {
  for (const Finding& f : r.findings) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

TEST(OccupancyTest, ReaderKeepsOneLaunchPerConfiguration) {
  TraceModel model = ReadModel(OccupancyTrace());
  // The four small_gemm launches share one; "plain" has a grid only.
  ASSERT_EQ(model.launches.size(), 5u);
  const GpuOp* small = nullptr;
  const GpuOp* low = nullptr;
  for (const GpuOp& op : model.gpu_ops) {
    if (model.Name(op.name) == "small_gemm" && small == nullptr) small = &op;
    if (model.Name(op.name) == "low_occ" && low == nullptr) low = &op;
    if (model.Name(op.name) == "plain") {
      ASSERT_NE(op.launch, kNoLaunch);
      EXPECT_EQ(model.launches[op.launch].grid_blocks, 1u);
      EXPECT_LT(model.launches[op.launch].blocks_per_sm, 0);
    }
  }
  ASSERT_NE(small, nullptr);
  ASSERT_NE(low, nullptr);
  const KernelLaunch& s = model.launches[small->launch];
  EXPECT_FLOAT_EQ(s.blocks_per_sm, 0.5f);
  EXPECT_FLOAT_EQ(s.warps_per_sm, 4.0f);
  EXPECT_EQ(s.occupancy_pct, 12);
  EXPECT_EQ(s.grid_blocks, 66u);
  EXPECT_EQ(s.block_threads, 256u);
  EXPECT_EQ(s.registers_per_thread, 128u);
  EXPECT_EQ(s.shared_memory_bytes, 49152u);
  // Grid and block are the products of their dimensions.
  EXPECT_EQ(model.launches[low->launch].grid_blocks, 264u);
  EXPECT_EQ(model.launches[low->launch].block_threads, 1024u);
}

TEST(OccupancyTest, DeviceSmEfficiencyAndOccupancyAreDurationWeighted) {
  const OccupancyStats stats = ComputeOccupancy(ReadModel(OccupancyTrace()));
  EXPECT_EQ(stats.kernels, 10u);
  EXPECT_EQ(stats.kernels_without_args, 1u);
  ASSERT_EQ(stats.devices.size(), 1u);
  const DeviceOccupancy& d = stats.devices[0];
  EXPECT_EQ(d.kernels, 9u);
  EXPECT_EQ(d.kernel_ns, 1500 * kUs);
  EXPECT_EQ(d.busy_ns, 1500 * kUs);
  // (400 x 0.5 + 400 + 600 + 100 x 0.1) / 1500
  EXPECT_NEAR(d.sm_efficiency_pct, 100.0 * 1210 / 1500, 1e-6);  // float blocks per SM
  // (400 x 12 + 400 x 50 + 600 x 10 + 100 x 5) / 1500
  EXPECT_NEAR(d.occupancy_pct, 31300.0 / 1500, 1e-9);

  ASSERT_EQ(stats.kernels_by_time.size(), 4u);
  EXPECT_EQ(stats.kernels_by_time[0].name, "low_occ");
  EXPECT_EQ(stats.kernels_by_time[1].name, "big_gemm");  // ties by name
  const KernelOccupancy& small = stats.kernels_by_time[2];
  EXPECT_EQ(small.name, "small_gemm");
  EXPECT_EQ(small.count, 4u);
  EXPECT_EQ(small.sm_idle_ns, 200 * kUs);
  EXPECT_NEAR(small.sm_efficiency_pct, 50, 1e-9);
  EXPECT_TRUE(stats.kernels_by_time[3].communication);
}

TEST(OccupancyTest, SmallGridsAndLowOccupancyFindings) {
  const TraceReport r = AnalyzeModel(ReadModel(OccupancyTrace()), AnalyzeOptions{});
  const Finding* small = FindId(r, "small_grids");
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->recoverable_ns, 200 * kUs);
  EXPECT_THAT(small->advice, HasSubstr("Most in 'small_gemm' (400 us, 0.50 blocks per SM, grid "
                                       "66 blocks x 256 threads, 128 registers/thread"));
  const Finding* low = FindId(r, "low_occupancy");
  ASSERT_NE(low, nullptr);
  // low_occ alone (small_gemm is grid-bound, NCCL never counts): 600 µs
  // x (1 - 10/25).
  EXPECT_EQ(low->recoverable_ns, 360 * kUs);
  EXPECT_THAT(low->title, HasSubstr("Kernels ran 600 us under 25% estimated occupancy; "
                                    "'low_occ' 600 us at 10%"));

  AnalyzeOptions strict;
  strict.occupancy_share = 0.08;
  EXPECT_EQ(FindId(AnalyzeModel(ReadModel(OccupancyTrace()), strict), "low_occupancy"), nullptr);
}

TEST(OccupancyTest, KernelsWithoutArgsGiveNoFigures) {
  TraceBuilder b;
  b.Gpuctl({});
  b.Kernel("gemm", 1000 * kUs, 100 * kUs, 1);
  const TraceReport r = AnalyzeModel(ReadModel(b.Json()), AnalyzeOptions{});
  EXPECT_EQ(r.occupancy.kernels, 1u);
  EXPECT_EQ(r.occupancy.kernels_without_args, 1u);
  EXPECT_TRUE(r.occupancy.devices.empty());
  EXPECT_EQ(FindId(r, "small_grids"), nullptr);
  EXPECT_THAT(RenderText({r}, r.findings, 100), ::testing::Not(HasSubstr("SM EFFICIENCY")));
}

TEST(OccupancyTest, TextJsonAndHtmlShowTheFigures) {
  std::vector<TraceReport> reports = {AnalyzeModel(ReadModel(OccupancyTrace()), AnalyzeOptions{})};
  const std::vector<Finding> ranked = RankFindings(reports);
  EXPECT_THAT(RenderText(reports, ranked, 100),
              HasSubstr("    0    0        9   1.50 ms   80.7%     20.9%  low_occ (10.0%)\n"));
  nlohmann::json doc = nlohmann::json::parse(RenderJson(reports, ranked, {}, AnalyzeOptions{}));
  const nlohmann::json& o = doc["traces"][0]["occupancy"];
  EXPECT_EQ(o["kernels_without_args"], 1);
  EXPECT_EQ(o["devices"][0]["sm_efficiency_pct"], 80.67);
  EXPECT_EQ(o["top_kernels"][2]["longest"]["grid_blocks"], 66);
  EXPECT_EQ(o["top_kernels"][2]["sm_idle_ns"], 200 * kUs);
  EXPECT_EQ(doc["options"]["occupancy_share"], 0.25);
  const std::string html = RenderHtml(reports, ranked, {}, AnalyzeOptions{});
  EXPECT_THAT(html, HasSubstr("<td class=\"sm-efficiency\">80.7%</td><td class=\"occupancy\">"
                              "20.9%</td>"));
}

}  // namespace
}  // namespace gpuctl::analysis::occupancy_test
