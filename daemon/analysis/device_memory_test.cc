// Diagnosis 10 (device memory) from hand-built traces: gpuctl's counter
// track and PyTorch's "[memory]" events, step boundaries, growth and peak.
#include "daemon/analysis/device_memory.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "daemon/analysis/analyze.h"
#include "daemon/analysis/report.h"
#include "daemon/analysis/testing/trace_builder.h"
#include "daemon/analysis/trace_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::analysis {
namespace {

using ::testing::ElementsAre;
using testing::TraceBuilder;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kGiB = int64_t{1} << 30;

// The builder's deviceProperties with device 0's memory size.
std::string WithMemorySize(const std::string& json, int64_t bytes) {
  return absl::StrReplaceAll(
      json, {{"\"deviceProperties\": [{\"id\": 0}]",
              absl::StrCat("\"deviceProperties\": [{\"id\": 0, \"totalGlobalMem\": ", bytes,
                           "}, {\"id\": 1, \"totalGlobalMem\": 7}]")}});
}

TraceReport AnalyzeMemoryJson(const std::string& json, const AnalyzeOptions& options = {}) {
  absl::StatusOr<TraceModel> model = ReadTraceBytes(json, "trace.json");
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  return AnalyzeModel(*model, options);
}

const Finding* MemFinding(const TraceReport& r, const std::string& id) {
  for (const Finding& f : r.findings) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

double MemNumber(const Finding& f, const std::string& name) {
  for (const auto& [n, v] : f.numbers) {
    if (n == name) return v;
  }
  ADD_FAILURE() << "no number " << name << " in " << f.id;
  return -1;
}

// gpuctl's counter sample, as chrome_trace_memory.cc writes it.
std::string Counter(int device, int64_t ts_ns, int64_t bytes) {
  return absl::StrCat("{\"ph\": \"C\", \"cat\": \"gpu_memory\", \"name\": \"Device memory ",
                      "allocated (GPU ", device, ")\", \"pid\": ", device,
                      ", \"tid\": 0, \"ts\": ", ts_ns / 1000, ".", ts_ns % 1000 / 100,
                      ts_ns % 100 / 10, ts_ns % 10, ", \"args\": {\"bytes\": ", bytes, "}}");
}

// PyTorch's profile_memory event as kineto writes it; `total_reserved` -1
// leaves "Total Reserved" out (older PyTorch).
std::string AllocatorEvent(int device_type, int64_t ts_ns, int64_t total_allocated, int64_t bytes,
                           int64_t total_reserved = -1) {
  const std::string reserved =
      total_reserved < 0 ? "" : absl::StrCat("\"Total Reserved\": ", total_reserved, ", ");
  return absl::StrCat(
      "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": ",
      "\"[memory]\", \"pid\": 4242, \"tid\": 4243, \"ts\": ", ts_ns / 1000, ", \"args\": {",
      reserved, "\"Total Allocated\": ", total_allocated, ", \"Bytes\": ", bytes,
      ", \"Addr\": 139637263040512, \"Device Type\": ", device_type, ", \"Device Id\": 0}}");
}

// Four 100 ms steps, a kernel in each.
TraceBuilder FourMemorySteps(bool gpuctl) {
  TraceBuilder b;
  if (gpuctl) {
    TraceBuilder::Meta meta;
    meta.activities = {"kernel", "runtime", "memory"};
    b.Gpuctl(meta);
  }
  for (int i = 0; i < 4; ++i) {
    b.Step(i + 1, int64_t{i} * 100 * kMs, 100 * kMs);
    b.Kernel("k", int64_t{i} * 100 * kMs + 10 * kMs, 50 * kMs, 0);
  }
  return b;
}

TEST(DeviceMemoryTest, CounterGrowingAtEveryStepIsLeakLike) {
  TraceBuilder b = FourMemorySteps(true);
  b.Raw(Counter(0, 0, 0));
  b.Raw(Counter(0, 10 * kMs, 2 * kGiB));
  b.Raw(Counter(0, 20 * kMs, 1 * kGiB));  // freed within step 1: no boundary sees it
  b.Raw(Counter(0, 150 * kMs, 2 * kGiB));
  b.Raw(Counter(0, 250 * kMs, 3 * kGiB));
  b.Raw(Counter(0, 350 * kMs, 4 * kGiB));
  TraceReport r = AnalyzeMemoryJson(WithMemorySize(b.Json(), 80 * kGiB));

  ASSERT_EQ(r.memory.devices.size(), 1u);
  const DeviceMemory& d = r.memory.devices[0];
  EXPECT_FALSE(d.allocator);
  EXPECT_EQ(d.samples, 6u);
  EXPECT_EQ(d.total_bytes, uint64_t{80} * kGiB);
  EXPECT_EQ(d.peak_bytes, 4 * kGiB);
  EXPECT_EQ(d.peak_ts_ns, 350 * kMs);
  EXPECT_THAT(d.step_numbers, ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(d.step_bytes, ElementsAre(0, 1 * kGiB, 2 * kGiB, 3 * kGiB, 4 * kGiB));
  EXPECT_TRUE(d.growing);
  EXPECT_DOUBLE_EQ(d.growth_bytes_per_step, 1.0 * kGiB);
  EXPECT_EQ(d.steps_until_full, 76);  // (80 - 4) GiB at 1 GiB a step

  const Finding* growth = MemFinding(r, "memory_growth");
  ASSERT_NE(growth, nullptr);
  EXPECT_EQ(growth->title, "GPU 0 memory grew 1024.0 MiB per step over 4 steps");
  EXPECT_THAT(growth->advice, ::testing::HasSubstr("full in at most 76 steps"));
  EXPECT_THAT(growth->advice, ::testing::HasSubstr("caching allocator"));
  EXPECT_EQ(MemNumber(*growth, "growth_bytes_per_step"), 1.0 * kGiB);
  EXPECT_EQ(MemNumber(*growth, "steps_until_full"), 76);
  EXPECT_EQ(growth->recoverable_ns, 0);
  // 5 % of the device: under the default 90 %.
  EXPECT_EQ(MemFinding(r, "memory_peak"), nullptr);

  AnalyzeOptions low;
  low.memory_peak_share = 0.05;
  TraceReport at_five = AnalyzeMemoryJson(WithMemorySize(b.Json(), 80 * kGiB), low);
  const Finding* peak = MemFinding(at_five, "memory_peak");
  ASSERT_NE(peak, nullptr);
  EXPECT_DOUBLE_EQ(MemNumber(*peak, "peak_pct"), 5.0);
  EXPECT_EQ(MemNumber(*peak, "peak_bytes"), 4.0 * kGiB);
  EXPECT_EQ(peak->at.start_ns, 350 * kMs);

  nlohmann::json json = DeviceMemoryJson(r.memory);
  EXPECT_EQ(json[0]["source"], "cupti");
  EXPECT_EQ(json[0]["steps_until_full"], 76);
}

TEST(DeviceMemoryTest, AStepEndingLowerOrTooFewStepsIsNotGrowth) {
  TraceBuilder lower = FourMemorySteps(true);
  lower.Raw(Counter(0, 50 * kMs, 1 * kGiB));
  lower.Raw(Counter(0, 150 * kMs, 3 * kGiB));
  lower.Raw(Counter(0, 250 * kMs, 2 * kGiB));  // step 3 ends below step 2
  lower.Raw(Counter(0, 350 * kMs, 5 * kGiB));
  TraceReport r = AnalyzeMemoryJson(WithMemorySize(lower.Json(), 80 * kGiB));
  ASSERT_EQ(r.memory.devices.size(), 1u);
  EXPECT_THAT(r.memory.devices[0].step_bytes,
              ElementsAre(0, 1 * kGiB, 3 * kGiB, 2 * kGiB, 5 * kGiB));
  EXPECT_FALSE(r.memory.devices[0].growing);
  EXPECT_EQ(MemFinding(r, "memory_growth"), nullptr);

  TraceBuilder two;
  TraceBuilder::Meta meta;
  meta.activities = {"kernel", "memory"};
  two.Gpuctl(meta);
  for (int i = 0; i < 2; ++i) {
    two.Step(i + 1, int64_t{i} * 100 * kMs, 100 * kMs);
    two.Kernel("k", int64_t{i} * 100 * kMs, 10 * kMs, 0);
    two.Raw(Counter(0, int64_t{i} * 100 * kMs + 50 * kMs, (i + 1) * kGiB));
  }
  TraceReport few = AnalyzeMemoryJson(two.Json());
  ASSERT_EQ(few.memory.devices.size(), 1u);
  EXPECT_EQ(few.memory.devices[0].step_numbers.size(), 2u);
  EXPECT_FALSE(few.memory.devices[0].growing);
  // No deviceProperties size: the peak cannot be judged.
  EXPECT_EQ(few.memory.devices[0].total_bytes, 0u);
  EXPECT_EQ(MemFinding(few, "memory_peak"), nullptr);
}

TEST(DeviceMemoryTest, PyTorchAllocatorEventsPeakNearTheDeviceSize) {
  TraceBuilder b = FourMemorySteps(false);
  // Host memory (Device Type 0) is not the device's.
  b.Raw(AllocatorEvent(0, 5 * kMs, 200 * kGiB, 200 * kGiB));
  b.Raw(AllocatorEvent(1, 50 * kMs, 60 * kGiB, 60 * kGiB));
  b.Raw(AllocatorEvent(1, 120 * kMs, 75 * kGiB, 15 * kGiB));
  b.Raw(AllocatorEvent(1, 180 * kMs, 60 * kGiB, -15 * kGiB));
  b.Raw(AllocatorEvent(1, 220 * kMs, 75 * kGiB, 15 * kGiB));
  b.Raw(AllocatorEvent(1, 280 * kMs, 60 * kGiB, -15 * kGiB));
  TraceReport r = AnalyzeMemoryJson(WithMemorySize(b.Json(), 80 * kGiB));

  ASSERT_EQ(r.memory.devices.size(), 1u);
  const DeviceMemory& d = r.memory.devices[0];
  EXPECT_TRUE(d.allocator);
  EXPECT_EQ(d.samples, 5u);
  EXPECT_EQ(d.peak_bytes, 75 * kGiB);
  EXPECT_EQ(d.peak_ts_ns, 120 * kMs);
  // Before the allocator's first event its total is unknown: step 1 is
  // left out.
  EXPECT_THAT(d.step_numbers, ElementsAre(2, 3, 4));
  EXPECT_THAT(d.step_bytes, ElementsAre(60 * kGiB, 60 * kGiB, 60 * kGiB, 60 * kGiB));
  EXPECT_FALSE(d.growing);

  const Finding* peak = MemFinding(r, "memory_peak");
  ASSERT_NE(peak, nullptr);
  EXPECT_EQ(peak->title, "GPU 0 memory peaked at 75.00 GiB, 93.8% of its 80.00 GiB");
  EXPECT_DOUBLE_EQ(MemNumber(*peak, "peak_pct"), 93.75);
  EXPECT_EQ(MemNumber(*peak, "total_bytes"), 80.0 * kGiB);
  EXPECT_THAT(peak->advice, ::testing::HasSubstr("PyTorch's allocated bytes"));
  EXPECT_THAT(peak->advice, ::testing::Not(::testing::HasSubstr("at least")));
  EXPECT_EQ(MemFinding(r, "memory_growth"), nullptr);

  // At 94 % the same peak is not a finding.
  AnalyzeOptions higher;
  higher.memory_peak_share = 0.94;
  EXPECT_EQ(
      MemFinding(AnalyzeMemoryJson(WithMemorySize(b.Json(), 80 * kGiB), higher), "memory_peak"),
      nullptr);
}

TEST(DeviceMemoryTest, TheAllocatorsReservedBytesAreWhatThePeakIsJudgedOn) {
  // 60 GiB of tensors, but the cache holds 76 GiB of the 80 GiB device at
  // its peak (freed blocks it keeps): the peak finding is about the 76.
  TraceBuilder b = FourMemorySteps(false);
  b.Raw(AllocatorEvent(1, 50 * kMs, 50 * kGiB, 50 * kGiB, 52 * kGiB));
  b.Raw(AllocatorEvent(1, 120 * kMs, 60 * kGiB, 10 * kGiB, 76 * kGiB));
  b.Raw(AllocatorEvent(1, 180 * kMs, 40 * kGiB, -20 * kGiB, 76 * kGiB));
  b.Raw(AllocatorEvent(1, 220 * kMs, 45 * kGiB, 5 * kGiB, 70 * kGiB));
  TraceReport r = AnalyzeMemoryJson(WithMemorySize(b.Json(), 80 * kGiB));
  ASSERT_EQ(r.memory.devices.size(), 1u);
  const DeviceMemory& d = r.memory.devices[0];
  EXPECT_EQ(d.peak_bytes, 60 * kGiB);
  EXPECT_EQ(d.peak_reserved_bytes, 76 * kGiB);
  EXPECT_EQ(d.peak_reserved_ts_ns, 120 * kMs);
  const Finding* peak = MemFinding(r, "memory_peak");
  ASSERT_NE(peak, nullptr);
  EXPECT_EQ(peak->title,
            "GPU 0 memory peaked at 76.00 GiB reserved by PyTorch (60.00 GiB allocated), 95.0% of "
            "its 80.00 GiB");
  EXPECT_DOUBLE_EQ(MemNumber(*peak, "peak_reserved_bytes"), 76.0 * kGiB);
  EXPECT_DOUBLE_EQ(MemNumber(*peak, "peak_pct"), 95.0);
  EXPECT_THAT(peak->advice, ::testing::HasSubstr("reserved is what it holds of the device"));
  EXPECT_EQ(DeviceMemoryJson(r.memory)[0]["peak_reserved_bytes"], 76 * kGiB);
  // Allocated bytes alone (75 % of the device) would not have been a finding.
  EXPECT_LT(static_cast<double>(d.peak_bytes), 0.9 * 80 * kGiB);
}

TEST(DeviceMemoryTest, TheHtmlReportChartsEachDevicesStepBoundaries) {
  TraceBuilder b = FourMemorySteps(true);
  b.Raw(Counter(0, 0, 0));
  b.Raw(Counter(0, 150 * kMs, 2 * kGiB));
  b.Raw(Counter(0, 250 * kMs, 3 * kGiB));
  b.Raw(Counter(0, 350 * kMs, 4 * kGiB));
  const TraceReport r = AnalyzeMemoryJson(WithMemorySize(b.Json(), 80 * kGiB));
  const std::vector<TraceReport> reports = {r};
  const std::string html = RenderHtml(reports, RankFindings(reports), {}, {});
  EXPECT_THAT(html, ::testing::HasSubstr("<section id=\"memory\"><h2>Device memory</h2>"));
  EXPECT_THAT(html, ::testing::HasSubstr("class=\"memory-chart\" data-device=\"0\" "
                                         "data-points=\"5\""));
  // One point per boundary with its bytes: step 1's start, then each end.
  for (int64_t bytes : {int64_t{0}, 2 * kGiB, 3 * kGiB, 4 * kGiB}) {
    EXPECT_TRUE(absl::StrContains(html, absl::StrCat("data-bytes=\"", bytes, "\"><title>")))
        << bytes;
  }
  EXPECT_TRUE(absl::StrContains(html, "<title>end of step 1: 0.00 GiB</title>"));
  EXPECT_THAT(html, ::testing::HasSubstr("<title>end of step 4: 4.00 GiB</title>"));
  // Peak 4 GiB of 80 GiB; growth 1 GiB a step; full in 76 steps.
  EXPECT_THAT(html, ::testing::HasSubstr("<td class=\"memory-share\">5.0%</td>"));
  EXPECT_THAT(html, ::testing::HasSubstr("<td>1024.0 MiB</td><td>76 steps</td>"));
  // The device's 80 GiB is far above 2x the highest point: no limit line.
  EXPECT_THAT(html, ::testing::Not(::testing::HasSubstr("memory-limit\" x1")));

  const TraceReport none = AnalyzeMemoryJson(FourMemorySteps(true).Json());
  const std::vector<TraceReport> without = {none};
  EXPECT_THAT(RenderHtml(without, RankFindings(without), {}, {}),
              ::testing::Not(::testing::HasSubstr("id=\"memory\"")));
}

TEST(DeviceMemoryTest, NoSamplesNoDevices) {
  TraceReport r = AnalyzeMemoryJson(WithMemorySize(FourMemorySteps(true).Json(), 80 * kGiB));
  EXPECT_TRUE(r.memory.devices.empty());
  EXPECT_EQ(MemFinding(r, "memory_peak"), nullptr);
  EXPECT_EQ(MemFinding(r, "memory_growth"), nullptr);
}

}  // namespace
}  // namespace gpuctl::analysis
