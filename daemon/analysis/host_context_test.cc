#include "daemon/analysis/host_context.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/analysis/analyze.h"
#include "daemon/analysis/report.h"
#include "daemon/analysis/testing/trace_builder.h"
#include "daemon/analysis/trace_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::analysis {
namespace {

using ::testing::HasSubstr;
using testing::TraceBuilder;

constexpr int64_t kMilli = 1'000'000;
constexpr int64_t kHelperPid = 5000, kHelperTid = 5001;

std::string Us(int64_t ns) { return absl::StrCat(ns / 1000, ".", ns % 1000 / 100, "00"); }

std::string Sample(int64_t tid, int64_t pid, int64_t ts, const std::string& top) {
  return absl::StrCat(R"hc({"ph":"i","s":"t","cat":"cpu_sample","name":")hc", top,
                      R"hc(","pid":)hc", pid, R"hc(,"tid":)hc", tid, R"hc(,"ts":)hc", Us(ts),
                      R"hc(,"args":{"stack":[")hc", top, R"hc(","main"]}})hc");
}

std::string OffCpu(int64_t tid, int64_t pid, int64_t start, int64_t end, const std::string& reason,
                   const std::string& extra_args) {
  return absl::StrCat(R"hc({"ph":"X","cat":"off_cpu","name":"off_cpu ()hc", reason,
                      R"hc()","pid":)hc", pid, R"hc(,"tid":)hc", tid, R"hc(,"ts":)hc", Us(start),
                      R"hc(,"dur":)hc", Us(end - start), R"hc(,"args":{"reason":")hc", reason,
                      R"hc(")hc", extra_args, "}}");
}

std::string ThreadName(int64_t pid, int64_t tid, const std::string& name) {
  return absl::StrCat(R"hc({"ph":"M","name":"thread_name","pid":)hc", pid, R"hc(,"tid":)hc", tid,
                      R"hc(,"args":{"name":")hc", name, R"hc("}})hc");
}

// One 20 ms host-bound gap (1 ms to 21 ms) before the second kernel. In it
// the launching thread is blocked 12 ms in read <- load_batch, preempted
// 3 ms by "stress", on the CPU the other 5 ms (3 samples in collate, 2 in
// tokenize); a helper process's thread is preempted 4 ms and blocked 2 ms.
std::string GapTrace() {
  constexpr int64_t kPid = TraceBuilder::kPid, kTid = TraceBuilder::kTid;
  TraceBuilder b;
  b.Gpuctl({.window_start_ns = 0, .window_end_ns = 50 * kMilli});
  b.Runtime("cudaLaunchKernel", 0, kMilli / 100, 1);
  b.Kernel("gemm", 0, kMilli, 1);
  b.Runtime("cudaLaunchKernel", 20 * kMilli, kMilli / 100, 2);
  b.Kernel("gemm", 21 * kMilli, kMilli, 2);
  b.Raw(ThreadName(kPid, kTid, "python"));
  b.Raw(ThreadName(kHelperPid, kHelperTid, "pt_data_worker"));
  b.Raw(OffCpu(kTid, kPid, 2 * kMilli, 14 * kMilli, "blocked",
               R"hc(,"stack":["read","load_batch","main"])hc"));
  b.Raw(OffCpu(kTid, kPid, 15 * kMilli, 18 * kMilli, "preempted",
               R"hc(,"preempted_by":"stress (999)")hc"));
  b.Raw(OffCpu(kTid, kPid, 30 * kMilli, 40 * kMilli, "blocked", R"hc(,"stack":["futex_wait"])hc"));
  for (int64_t at : {kMilli + kMilli / 2, 14 * kMilli + kMilli / 2, 19 * kMilli}) {
    b.Raw(Sample(kTid, kPid, at, "collate"));
  }
  for (int64_t at : {18 * kMilli + kMilli / 2, 19 * kMilli + kMilli / 2}) {
    b.Raw(Sample(kTid, kPid, at, "tokenize"));
  }
  b.Raw(Sample(kTid, kPid, 25 * kMilli, "outside_the_gap"));
  b.Raw(OffCpu(kHelperTid, kHelperPid, 5 * kMilli, 9 * kMilli, "preempted",
               R"hc(,"preempted_by":"stress (999)")hc"));
  b.Raw(OffCpu(kHelperTid, kHelperPid, 10 * kMilli, 12 * kMilli, "blocked", ""));
  return b.Json();
}

TraceReport AnalyzeJson(const std::string& json) {
  absl::StatusOr<TraceModel> model = ReadTraceBytes(json, "trace.json");
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? AnalyzeModel(*model, {}) : TraceReport{};
}

TEST(HostContextTest, TheReaderKeepsSamplesSlicesAndTheirFrames) {
  absl::StatusOr<TraceModel> model = ReadTraceBytes(GapTrace(), "trace.json");
  ASSERT_TRUE(model.ok()) << model.status();
  const HostEvents& host = model->host;
  ASSERT_EQ(host.samples.size(), 6u);
  ASSERT_EQ(host.off_cpu.size(), 5u);
  ASSERT_EQ(host.threads.size(), 2u);
  EXPECT_EQ(model->info.skipped_events, 0u);
  const OffCpuSlice& read = host.off_cpu[0];  // sorted by thread, then start
  EXPECT_EQ(read.tid, TraceBuilder::kTid);
  EXPECT_EQ(read.start_ns, 2 * kMilli);
  EXPECT_EQ(read.end_ns, 14 * kMilli);
  EXPECT_EQ(read.kind, OffCpuKind::kBlocked);
  EXPECT_EQ(model->Name(read.top), "read");
  EXPECT_EQ(model->Name(read.caller), "load_batch");
  EXPECT_EQ(read.preempted_by, kNoName);
  EXPECT_EQ(host.off_cpu[1].kind, OffCpuKind::kPreempted);
  EXPECT_EQ(model->Name(host.off_cpu[1].preempted_by), "stress (999)");
  EXPECT_EQ(host.off_cpu[1].top, kNoName);
  EXPECT_EQ(model->Name(host.off_cpu[2].top), "futex_wait");
  EXPECT_EQ(host.off_cpu[2].caller, kNoName);
  EXPECT_EQ(model->Name(host.samples[0].top), "collate");
  // Host events are not GPU work or host ranges.
  EXPECT_EQ(model->gpu_ops.size(), 2u);
  EXPECT_TRUE(model->ranges.empty());
}

TEST(HostContextTest, AttributesTheHostBoundGapToWhatTheLaunchingThreadDid) {
  const TraceReport r = AnalyzeJson(GapTrace());
  const HostContext& host = r.host;
  ASSERT_TRUE(host.present);
  EXPECT_EQ(host.gaps, 1u);
  const CpuAttribution& t = host.launching;
  EXPECT_EQ(t.total_ns, 20 * kMilli);
  EXPECT_EQ(t.blocked_ns, 12 * kMilli);
  EXPECT_EQ(t.preempted_ns, 3 * kMilli);
  EXPECT_EQ(t.on_cpu_ns, 5 * kMilli);
  EXPECT_EQ(t.unknown_ns, 0);
  EXPECT_EQ(t.samples, 5u);
  ASSERT_EQ(t.blocked_in.size(), 1u);
  EXPECT_EQ(t.blocked_in[0].name, "read <- load_batch");
  EXPECT_EQ(t.blocked_in[0].ns, 12 * kMilli);
  ASSERT_EQ(t.preempted_by.size(), 1u);
  EXPECT_EQ(t.preempted_by[0].name, "stress (999)");
  ASSERT_EQ(t.on_cpu.size(), 2u);
  EXPECT_EQ(t.on_cpu[0].name, "collate");
  EXPECT_EQ(t.on_cpu[0].count, 3u);
  EXPECT_EQ(t.on_cpu[0].ns, 3 * kMilli);
  EXPECT_EQ(t.on_cpu[1].ns, 2 * kMilli);

  EXPECT_EQ(host.helper_threads, 1u);
  EXPECT_EQ(host.helpers.total_ns, 20 * kMilli);
  EXPECT_EQ(host.helpers.preempted_ns, 4 * kMilli);
  EXPECT_EQ(host.helpers.blocked_ns, 2 * kMilli);
  ASSERT_EQ(host.helpers.blocked_in.size(), 1u);
  EXPECT_EQ(host.helpers.blocked_in[0].name, "(no stack)");

  // Over the whole window: the launching thread first, its futex wait too.
  ASSERT_EQ(host.threads.size(), 2u);
  EXPECT_EQ(host.threads[0].tid, TraceBuilder::kTid);
  EXPECT_EQ(host.threads[0].name, "python");
  EXPECT_EQ(host.threads[0].time.total_ns, 50 * kMilli);
  EXPECT_EQ(host.threads[0].time.blocked_ns, 22 * kMilli);
  EXPECT_EQ(host.threads[0].time.samples, 6u);
  EXPECT_EQ(host.threads[1].name, "pt_data_worker");
}

TEST(HostContextTest, TheFindingNamesTheBlockingCallAndTheHelpersPreemption) {
  const TraceReport r = AnalyzeJson(GapTrace());
  const Finding* f = nullptr;
  for (const Finding& found : r.findings) {
    if (found.id == "host_bound_cpu") f = &found;
  }
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->title,
            "GPU idle 20.0 ms while the launching thread was off-CPU blocked in `read` <- "
            "`load_batch` (12.0 ms)");
  EXPECT_EQ(f->recoverable_ns, 12 * kMilli);
  EXPECT_EQ(f->at.start_ns, kMilli);
  EXPECT_EQ(f->at.end_ns, 21 * kMilli);
  EXPECT_THAT(f->advice, HasSubstr("60.0% blocked, 15.0% preempted, 25.0% on the CPU"));
  EXPECT_THAT(f->advice, HasSubstr("helper processes were preempted 4.00 ms (20.0% of their "
                                   "time), mostly by stress (999) (4.00 ms)"));
  nlohmann::json numbers;
  for (const auto& [name, value] : f->numbers) numbers[name] = value;
  EXPECT_EQ(numbers["blocked_in:read <- load_batch_ns"], 12 * kMilli);
  EXPECT_EQ(numbers["preempted_by:stress (999)_ns"], 3 * kMilli);
  EXPECT_EQ(numbers["on_cpu:collate_ns"], 3 * kMilli);
  EXPECT_EQ(numbers["helper_preempted_ns"], 4 * kMilli);

  const nlohmann::json doc = nlohmann::json::parse(RenderJson({r}, r.findings, {}, {}));
  const nlohmann::json& host = doc["traces"][0]["host_context"];
  EXPECT_EQ(host["host_bound"]["launching"]["blocked_in"][0]["name"], "read <- load_batch");
  EXPECT_EQ(host["host_bound"]["launching"]["blocked_ns"], 12 * kMilli);
  EXPECT_EQ(host["host_bound"]["helpers"]["threads"], 1);
  EXPECT_EQ(host["threads"][0]["blocked_in"][1]["name"], "futex_wait");
  EXPECT_THAT(RenderText({r}, r.findings), HasSubstr("`read` <- `load_batch`"));
}

TEST(HostContextTest, PreemptionOrRunningCanBeTheCause) {
  constexpr int64_t kPid = TraceBuilder::kPid, kTid = TraceBuilder::kTid;
  TraceBuilder b;
  b.Gpuctl({.window_start_ns = 0, .window_end_ns = 50 * kMilli});
  b.Runtime("cudaLaunchKernel", 0, kMilli / 100, 1);
  b.Kernel("gemm", 0, kMilli, 1);
  b.Runtime("cudaLaunchKernel", 20 * kMilli, kMilli / 100, 2);
  b.Kernel("gemm", 21 * kMilli, kMilli, 2);
  b.Raw(OffCpu(kTid, kPid, 2 * kMilli, 14 * kMilli, "preempted", ""));
  TraceReport r = AnalyzeJson(b.Json());
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings.back().id, "host_bound_cpu");
  EXPECT_EQ(r.findings.back().title,
            "GPU idle 20.0 ms while the launching thread was preempted (12.0 ms)");

  TraceBuilder running;
  running.Gpuctl({.window_start_ns = 0, .window_end_ns = 50 * kMilli});
  running.Runtime("cudaLaunchKernel", 0, kMilli / 100, 1);
  running.Kernel("gemm", 0, kMilli, 1);
  running.Runtime("cudaLaunchKernel", 20 * kMilli, kMilli / 100, 2);
  running.Kernel("gemm", 21 * kMilli, kMilli, 2);
  running.Raw(Sample(kTid, kPid, 15 * kMilli, "collate"));
  r = AnalyzeJson(running.Json());
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings.back().title,
            "GPU idle 20.0 ms while the launching thread ran on the CPU (20.0 ms), mostly in "
            "`collate`");
}

TEST(HostContextTest, WithoutHostContextThereIsNoFindingAndJsonSaysNull) {
  TraceBuilder b;
  b.Gpuctl({.window_start_ns = 0, .window_end_ns = 50 * kMilli});
  b.Runtime("cudaLaunchKernel", 0, kMilli / 100, 1);
  b.Kernel("gemm", 0, kMilli, 1);
  b.Runtime("cudaLaunchKernel", 20 * kMilli, kMilli / 100, 2);
  b.Kernel("gemm", 21 * kMilli, kMilli, 2);
  // Another thread's events do not explain the launching thread's gap.
  b.Raw(OffCpu(77, TraceBuilder::kPid, 2 * kMilli, 14 * kMilli, "blocked", ""));
  const TraceReport r = AnalyzeJson(b.Json());
  EXPECT_TRUE(r.host.present);
  EXPECT_EQ(r.host.gaps, 0u);
  for (const Finding& f : r.findings) EXPECT_NE(f.id, "host_bound_cpu");

  TraceBuilder bare;
  bare.Gpuctl({});
  bare.Kernel("gemm", 0, kMilli, 1);
  const TraceReport none = AnalyzeJson(bare.Json());
  EXPECT_FALSE(none.host.present);
  const nlohmann::json doc = nlohmann::json::parse(RenderJson({none}, none.findings, {}, {}));
  EXPECT_TRUE(doc["traces"][0]["host_context"].is_null());
}

}  // namespace
}  // namespace gpuctl::analysis
