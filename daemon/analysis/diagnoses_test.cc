#include "daemon/analysis/diagnoses.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "daemon/analysis/analyze.h"
#include "daemon/analysis/report.h"
#include "daemon/analysis/testing/trace_builder.h"
#include "daemon/analysis/trace_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::analysis {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TraceBuilder;

constexpr int64_t kUs = 1000;

// Nearest-rank percentiles, selected without sorting, against the sorted
// values: sizes around the rank boundaries, duplicates, negative values.
TEST(PercentilesTest, SelectionMatchesTheSortedNearestRank) {
  std::mt19937_64 random(7);
  for (size_t n = 1; n <= 1200; n += n < 40 ? 1 : 97) {
    for (int64_t spread : {int64_t{3}, int64_t{1000000}}) {
      std::vector<int64_t> values(n);
      for (int64_t& v : values) v = static_cast<int64_t>(random() % spread) - spread / 2;
      std::vector<int64_t> sorted = values;
      std::sort(sorted.begin(), sorted.end());
      auto rank = [&](size_t permille) {
        return sorted[std::max<size_t>((n * permille + 999) / 1000, 1) - 1];
      };
      const Percentiles p = ComputePercentiles(values);
      EXPECT_EQ(p.count, n);
      EXPECT_EQ(p.p50, rank(500)) << n;
      EXPECT_EQ(p.p90, rank(900)) << n;
      EXPECT_EQ(p.p99, rank(990)) << n;
      EXPECT_EQ(p.max, sorted.back()) << n;
    }
  }
  EXPECT_EQ(ComputePercentiles({}).count, 0U);
}

TraceReport Analyze(const std::string& json, const AnalyzeOptions& options = {}) {
  absl::StatusOr<TraceModel> model = ReadTraceBytes(json, "trace.json");
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  return AnalyzeModel(*model, options);
}

const Finding* Find(const TraceReport& r, const std::string& id) {
  for (const Finding& f : r.findings) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

std::vector<std::string> Ids(const std::vector<Finding>& findings) {
  std::vector<std::string> ids;
  ids.reserve(findings.size());
  for (const Finding& f : findings) ids.push_back(f.id);
  return ids;
}

double Number(const Finding& f, const std::string& name) {
  for (const auto& [n, v] : f.numbers) {
    if (n == name) return v;
  }
  ADD_FAILURE() << "no number " << name << " in " << f.id;
  return -1;
}

// Ten 100 µs kernels back to back, each launched 50 µs ahead.
std::string CleanTrace() {
  TraceBuilder b;
  b.Gpuctl({});
  for (int i = 0; i < 10; ++i) {
    const int64_t start = 1000 * kUs + int64_t{i} * 100 * kUs;
    b.Runtime("cudaLaunchKernel", start - 50 * kUs, 5 * kUs, 100 + i);
    b.Kernel("gemm", start, 100 * kUs, 100 + i);
  }
  return b.Json();
}

TEST(DiagnosesTest, CleanTraceHasNoFinding) {
  TraceReport r = Analyze(CleanTrace());
  EXPECT_THAT(Ids(r.findings), ElementsAre());
  EXPECT_EQ(r.breakdown.process.compute_ns, 1000 * kUs);
  EXPECT_EQ(r.breakdown.process.idle_ns, 0);
  EXPECT_EQ(r.launch.kernels, 10u);
  EXPECT_EQ(r.launch.launch_delay_ns.p50, 45 * kUs);
}

// K1 [10, 110) µs; the host is in "DataLoader.__next__" until 290 µs and
// launches K2 at 300 µs; K2 runs [310, 410).
std::string HostBoundTrace() {
  TraceBuilder b;
  b.Gpuctl({.window_start_ns = 0, .window_end_ns = 1000 * kUs});
  b.Runtime("cudaLaunchKernel", 0, 5 * kUs, 1);
  b.Kernel("conv", 10 * kUs, 100 * kUs, 1);
  b.Range("DataLoader.__next__", 110 * kUs, 180 * kUs);
  b.Runtime("cudaLaunchKernel", 300 * kUs, 5 * kUs, 2);
  b.Kernel("conv", 310 * kUs, 100 * kUs, 2);
  b.Step(1, 0, 420 * kUs);
  b.Step(2, 420 * kUs, 580 * kUs);  // to the window's end: clipped
  return b.Json();
}

TEST(DiagnosesTest, HostBoundGapNamesTheCoveringRange) {
  TraceReport r = Analyze(HostBoundTrace());
  const GapTotals& host = r.gaps.classes[static_cast<int>(GapClass::kHostBound)];
  EXPECT_EQ(host.count, 1u);
  EXPECT_EQ(host.gpu_idle_ns, 200 * kUs);
  ASSERT_EQ(r.gaps.host_bound_ranges.size(), 1u);
  EXPECT_EQ(r.gaps.host_bound_ranges[0].name, "DataLoader.__next__");
  EXPECT_EQ(r.breakdown.process.span_ns(), 400 * kUs);
  EXPECT_EQ(r.breakdown.process.compute_ns, 200 * kUs);
  EXPECT_EQ(r.breakdown.process.idle_ns, 200 * kUs);

  ASSERT_EQ(r.breakdown.steps.size(), 2u);
  EXPECT_FALSE(r.breakdown.steps[0].clipped);
  EXPECT_EQ(r.breakdown.steps[0].compute_ns, 200 * kUs);
  EXPECT_EQ(r.breakdown.steps[0].idle_ns, 220 * kUs);
  EXPECT_TRUE(r.breakdown.steps[1].clipped);
  EXPECT_EQ(r.step_ns.count, 1u);
  EXPECT_EQ(r.step_ns.p50, 420 * kUs);

  EXPECT_THAT(Ids(r.findings), ElementsAre("clipped_window", "host_bound_idle"));
  const Finding* f = Find(r, "host_bound_idle");
  EXPECT_EQ(f->recoverable_ns, 200 * kUs);
  EXPECT_EQ(f->rank, 0);
  EXPECT_FALSE(f->low_confidence);  // a clipped step does not make it doubtful
  EXPECT_THAT(f->advice, HasSubstr("'DataLoader.__next__' (200 us)"));
  EXPECT_EQ(Number(*f, "gaps"), 1);
}

// K1 [10, 110); the host waits in cudaStreamSynchronize [20, 112) (also a
// "Stream Sync" record on the GPU's row, which is not GPU work) inside
// aten::item, then launches K2 at 150 µs; K2 runs [160, 260). Kineto's layout.
std::string SyncDrainTrace() {
  TraceBuilder b;
  b.Runtime("cudaLaunchKernel", 0, 5 * kUs, 1);
  b.Kernel("conv", 10 * kUs, 100 * kUs, 1);
  b.Range("aten::item", 18 * kUs, 97 * kUs, TraceBuilder::kTid, "cpu_op");
  b.Runtime("cudaStreamSynchronize", 20 * kUs, 92 * kUs, 50);
  b.Sync("Stream Sync", 20 * kUs, 92 * kUs, 50);
  b.Runtime("cudaLaunchKernel", 150 * kUs, 5 * kUs, 2);
  b.Kernel("conv", 160 * kUs, 100 * kUs, 2);
  return b.Json();
}

TEST(DiagnosesTest, SyncDrainAndSyncStalls) {
  TraceReport r = Analyze(SyncDrainTrace());
  EXPECT_EQ(r.info.format, TraceFormat::kKineto);
  EXPECT_EQ(r.breakdown.process.span_ns(), 250 * kUs);
  EXPECT_EQ(r.breakdown.process.compute_ns, 200 * kUs);
  EXPECT_EQ(r.breakdown.process.idle_ns, 50 * kUs);  // the sync record is not work
  const GapTotals& drain = r.gaps.classes[static_cast<int>(GapClass::kSyncDrain)];
  EXPECT_EQ(drain.count, 1u);
  EXPECT_EQ(drain.gpu_idle_ns, 50 * kUs);
  EXPECT_EQ(r.sync.calls, 1u);
  EXPECT_EQ(r.sync.host_ns, 92 * kUs);
  ASSERT_EQ(r.sync.call_sites.size(), 1u);
  EXPECT_EQ(r.sync.call_sites[0].name, "aten::item");

  EXPECT_THAT(Ids(r.findings), ElementsAre("sync_drain_idle", "sync_stalls"));
  EXPECT_EQ(Find(r, "sync_stalls")->recoverable_ns, 92 * kUs);
  EXPECT_THAT(Find(r, "sync_stalls")->advice, HasSubstr("'aten::item' (92.0 us)"));
  EXPECT_EQ(Find(r, "sync_drain_idle")->recoverable_ns, 50 * kUs);
  // Ranked: the larger recoverable time first.
  EXPECT_THAT(Ids(RankFindings({r})), ElementsAre("sync_stalls", "sync_drain_idle"));
}

// 200 kernels of 5 µs every 10 µs, each launched 8 µs ahead of its start:
// every gap is 5 µs of launch overhead.
std::string LaunchBoundTrace() {
  TraceBuilder b;
  b.Gpuctl({});
  for (int i = 0; i < 200; ++i) {
    const int64_t start = 100 * kUs + int64_t{i} * 10 * kUs;
    b.Runtime(i % 2 == 0 ? "cudaLaunchKernel_v7000" : "cuLaunchKernel", start - 8 * kUs, 5 * kUs,
              1 + i);
    b.Kernel("elementwise", start, 5 * kUs, 1 + i);
  }
  return b.Json();
}

TEST(DiagnosesTest, SmallKernelFloodIsLaunchBound) {
  TraceReport r = Analyze(LaunchBoundTrace());
  EXPECT_EQ(r.launch.kernels, 200u);
  EXPECT_EQ(r.launch.small_kernels, 200u);
  EXPECT_EQ(r.launch.kernel_launch_calls, 200u);
  EXPECT_EQ(r.launch.launch_delay_ns.p50, 3 * kUs);
  EXPECT_EQ(r.launch.launch_delay_ns.p99, 3 * kUs);
  const GapTotals& overhead = r.gaps.classes[static_cast<int>(GapClass::kLaunchOverhead)];
  EXPECT_EQ(overhead.count, 199u);
  EXPECT_EQ(overhead.gpu_idle_ns, 995 * kUs);
  EXPECT_THAT(Ids(r.findings), ElementsAre("launch_bound"));
  const Finding* f = Find(r, "launch_bound");
  EXPECT_EQ(f->recoverable_ns, 995 * kUs);
  EXPECT_EQ(Number(*f, "small_kernels"), 200);
  EXPECT_EQ(Number(*f, "small_kernel_time_pct"), 100);
  EXPECT_THAT(f->advice, HasSubstr("CUDA graphs"));
  EXPECT_THAT(f->title, HasSubstr("200 of 200 kernels (100.0%) run under 10.0 us"));

  // Thresholds are options: at 4 µs nothing is small.
  AnalyzeOptions strict;
  strict.small_kernel_ns = 4 * kUs;
  EXPECT_EQ(Find(Analyze(LaunchBoundTrace(), strict), "launch_bound"), nullptr);
}

TEST(DiagnosesTest, GraphLaunchesAreCounted) {
  TraceBuilder b;
  b.Runtime("cudaGraphLaunch", 0, 5 * kUs, 9);
  for (int64_t start : {10 * kUs, 20 * kUs}) {
    b.Raw(absl::StrCat(R"({"ph": "X", "cat": "kernel", "name": "g", "pid": 0, "tid": 7, "ts": )",
                       start / 1000, R"(, "dur": 5, "args": {"device": 0, "stream": 7,)",
                       R"( "correlation": 9, "graph id": 3, "graph node id": 1}})"));
  }
  TraceReport r = Analyze(b.Json());
  EXPECT_EQ(r.launch.graph_launch_calls, 1u);
  EXPECT_EQ(r.launch.graph_kernels, 2u);
  EXPECT_EQ(r.launch.launch_delay_ns.count, 1u);  // the graph's first kernel
  EXPECT_EQ(r.launch.launch_delay_ns.p50, 5 * kUs);
}

// Compute [0, 100) on stream 7, NCCL [50, 250) on stream 9, a 5 MB HtoD copy
// [250, 300) on stream 3. Kineto's layout, no runtime calls.
std::string CommTrace() {
  TraceBuilder b;
  b.Kernel("sm90_gemm", 0, 100 * kUs, 0, 7);
  b.Kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 50 * kUs, 200 * kUs, 0, 9);
  b.Memcpy("Memcpy HtoD (Pinned -> Device)", 250 * kUs, 50 * kUs, 0, 5'000'000, 3);
  return b.Json();
}

TEST(DiagnosesTest, BreakdownAndExposedCommunication) {
  AnalyzeOptions options;
  options.link_gbps = 400;
  TraceReport r = Analyze(CommTrace(), options);
  const ClassTimes& p = r.breakdown.process;
  EXPECT_EQ(p.span_ns(), 300 * kUs);
  EXPECT_EQ(p.compute_ns, 100 * kUs);
  EXPECT_EQ(p.communication_ns, 150 * kUs);
  EXPECT_EQ(p.memory_ns, 50 * kUs);
  EXPECT_EQ(p.idle_ns, 0);
  ASSERT_EQ(r.breakdown.devices.size(), 1u);
  EXPECT_EQ(r.breakdown.devices[0].communication_overlapped_ns, 50 * kUs);
  ASSERT_EQ(r.breakdown.devices[0].streams.size(), 3u);
  EXPECT_EQ(r.breakdown.devices[0].streams[0].stream, 3);
  EXPECT_EQ(r.breakdown.devices[0].streams[0].times.memory_ns, 50 * kUs);
  const CopyDirectionStats& htod = r.copies.directions[static_cast<int>(CopyDirection::kHtoD)];
  EXPECT_EQ(htod.count, 1u);
  EXPECT_DOUBLE_EQ(htod.gbps(), 100.0);

  EXPECT_THAT(Ids(r.findings),
              ElementsAre("activities_missing", "exposed_communication", "slow_copies"));
  EXPECT_EQ(Find(r, "exposed_communication")->recoverable_ns, 150 * kUs);
  EXPECT_EQ(Number(*Find(r, "exposed_communication"), "communication_overlapped_ns"), 50 * kUs);
  // At 400 GB/s the 5 MB take 12.5 µs of the 50.
  EXPECT_EQ(Find(r, "slow_copies")->recoverable_ns, 37'500);
  EXPECT_THAT(Find(r, "activities_missing")->title, HasSubstr("runtime"));
}

// A synchronous 1 MB DtoH copy (cudaMemcpy, the host held 120 µs) and an
// async HtoD copy of pageable memory [210, 260).
std::string CopyTrace() {
  TraceBuilder b;
  b.Gpuctl({});
  b.Runtime("cudaMemcpy", 0, 120 * kUs, 1);
  b.Memcpy("Memcpy DtoH (Device -> Pageable)", 10 * kUs, 100 * kUs, 1, 1'000'000);
  b.Runtime("cudaMemcpyAsync", 200 * kUs, 5 * kUs, 2);
  b.Memcpy("Memcpy HtoD (Pageable -> Device)", 210 * kUs, 50 * kUs, 2, 1'000'000);
  return b.Json();
}

TEST(DiagnosesTest, SyncAndPageableCopies) {
  TraceReport r = Analyze(CopyTrace());
  EXPECT_EQ(r.copies.sync_copies, 1u);
  EXPECT_EQ(r.copies.sync_copy_host_ns, 120 * kUs);
  EXPECT_EQ(r.copies.pageable_async_copies, 1u);
  EXPECT_EQ(r.copies.pageable_async_ns, 50 * kUs);
  EXPECT_DOUBLE_EQ(r.copies.directions[static_cast<int>(CopyDirection::kDtoH)].gbps(), 10.0);
  // The synchronous copy drained the queue before the next launch.
  EXPECT_EQ(r.gaps.classes[static_cast<int>(GapClass::kSyncDrain)].gpu_idle_ns, 100 * kUs);
  EXPECT_THAT(Ids(RankFindings({r})),
              ElementsAre("sync_copies", "sync_drain_idle", "pageable_copies"));
}

TEST(DiagnosesTest, DataQualityComesFirstAndLowersConfidence) {
  TraceBuilder b;
  b.Gpuctl({.dropped_events = 5,
            .cupti_dropped_records = 2,
            .dropped_at_cap = 3,
            .cupti_failed = true,
            .cupti_message = "buffer error",
            .activities = {"kernel"}});
  b.Kernel("conv", 10 * kUs, 100 * kUs, 0);
  b.Kernel("conv", 310 * kUs, 100 * kUs, 0);
  TraceReport r = Analyze(b.Json());
  EXPECT_THAT(Ids(r.findings),
              ElementsAre("dropped_records", "cupti_failed", "activities_missing", "other_idle"));
  EXPECT_EQ(Number(*Find(r, "dropped_records"), "dropped_at_cap"), 3);
  EXPECT_TRUE(Find(r, "other_idle")->low_confidence);
  EXPECT_EQ(Find(r, "other_idle")->recoverable_ns, 200 * kUs);
}

TEST(DiagnosesTest, ManifestNotesOfALateWindowAreDataQualityWithoutLoweringConfidence) {
  TraceBuilder b;
  b.Runtime("cudaLaunchKernel", 0, 5 * kUs, 1);
  b.Kernel("conv", 10 * kUs, 100 * kUs, 1);
  b.Runtime("cudaLaunchKernel", 300 * kUs, 5 * kUs, 2);
  b.Kernel("conv", 310 * kUs, 100 * kUs, 2);
  absl::StatusOr<TraceModel> model = ReadTraceBytes(b.Json(), "trace.json");
  ASSERT_TRUE(model.ok()) << model.status();
  const TraceReport before = AnalyzeModel(*model, {});
  ASSERT_FALSE(before.findings.empty());
  model->info.has_manifest = true;
  model->info.late_start = true;
  model->info.start_skew_ns = 1'500'000'000;
  model->info.joined_late = true;
  TraceReport r = AnalyzeModel(*model, {});
  ASSERT_EQ(r.findings.size(), before.findings.size() + 2);
  EXPECT_EQ(r.findings[0].id, "late_start");
  EXPECT_EQ(r.findings[1].id, "joined_late");
  EXPECT_TRUE(r.findings[0].data_quality);
  EXPECT_EQ(Number(r.findings[0], "start_skew_ns"), 1'500'000'000);
  EXPECT_THAT(r.findings[0].title, HasSubstr("1.50 s after the requested start"));
  // The file's own records are whole: its other findings keep their confidence.
  for (size_t i = 2; i < r.findings.size(); ++i) {
    EXPECT_EQ(r.findings[i].id, before.findings[i - 2].id);
    EXPECT_EQ(r.findings[i].low_confidence, before.findings[i - 2].low_confidence);
  }
}

TEST(DiagnosesTest, SyncRecordsStandInForMissingRuntimeCalls) {
  TraceBuilder b;
  b.Kernel("conv", 0, 100 * kUs, 0);
  b.Sync("Stream Sync", 10 * kUs, 80 * kUs, 0);
  b.Sync("Stream Wait Event", 20 * kUs, 50 * kUs, 0);  // the stream waits, not the host
  b.Kernel("conv", 100 * kUs, 100 * kUs, 0);
  TraceReport r = Analyze(b.Json());
  EXPECT_EQ(r.sync.calls, 1u);
  EXPECT_EQ(r.sync.host_ns, 80 * kUs);
  EXPECT_EQ(r.breakdown.process.compute_ns, 200 * kUs);
  ASSERT_NE(Find(r, "sync_stalls"), nullptr);
  EXPECT_EQ(Find(r, "sync_stalls")->recoverable_ns, 80 * kUs);
}

TEST(DiagnosesTest, HostOnlyTraceSaysSo) {
  TraceBuilder b;
  b.Gpuctl({.host_only = true, .host_only_reason = "no CUDA library loaded", .activities = {}});
  b.Range("train", 0, 100 * kUs);
  TraceReport r = Analyze(b.Json());
  EXPECT_THAT(Ids(r.findings), ElementsAre("host_only"));
  EXPECT_THAT(r.findings[0].title, HasSubstr("no CUDA library loaded"));
}

TEST(DiagnosesTest, KinetoFixtureHasNoGpuActivity) {
  absl::StatusOr<TraceModel> m =
      ReadTraceFile(absl::StrCat(GPUCTL_KINETO_FIXTURE_DIR, "/torch_profiler_cpu.json"));
  ASSERT_TRUE(m.ok()) << m.status();
  TraceReport r = AnalyzeModel(*m, {});
  EXPECT_THAT(Ids(r.findings), ElementsAre("no_gpu_activity"));
  EXPECT_EQ(r.breakdown.process.span_ns(), 0);
}

TEST(ReportTest, TextFitsOneHundredColumns) {
  std::vector<TraceReport> reports = {Analyze(HostBoundTrace()), Analyze(SyncDrainTrace())};
  std::string text = RenderText(reports, RankFindings(reports), 100);
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    EXPECT_LE(line.size(), 100u) << line;
  }
  EXPECT_THAT(text, HasSubstr("host_bound_idle [rank 0] recoverable ~200 us"));
  EXPECT_THAT(text, HasSubstr("DATA QUALITY"));
}

TEST(ReportTest, JsonCarriesTracesFindingsAndErrors) {
  std::vector<TraceReport> reports = {Analyze(HostBoundTrace())};
  std::string text = RenderJson(reports, RankFindings(reports), {{"bad.json", "malformed"}}, {});
  nlohmann::json doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc["schema"], "gpuctl.analyze/1");
  EXPECT_EQ(doc["options"]["small_kernel_ns"], 10000);
  const nlohmann::json& t = doc["traces"][0];
  EXPECT_EQ(t["format"], "gpuctl");
  EXPECT_EQ(t["rank"], 0);
  EXPECT_EQ(t["gpu"]["idle_ns"], 200000);
  EXPECT_EQ(t["steps"][0]["idle_ns"], 220000);
  EXPECT_EQ(t["steps"][1]["clipped"], true);
  EXPECT_EQ(t["idle_gaps"]["host_bound"]["gpu_idle_ns"], 200000);
  EXPECT_EQ(t["idle_gaps"]["host_bound_ranges"][0]["name"], "DataLoader.__next__");
  EXPECT_EQ(doc["findings"][0]["id"], "clipped_window");
  EXPECT_EQ(doc["findings"][1]["id"], "host_bound_idle");
  EXPECT_EQ(doc["findings"][1]["numbers"]["gpu_idle_ns"], 200000);
  EXPECT_EQ(doc["errors"][0]["file"], "bad.json");
}

}  // namespace
}  // namespace gpuctl::analysis
