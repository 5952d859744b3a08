// The reader and the diagnoses on what gpuctld's own converter writes
// (daemon/convert), not only on hand-built JSON: a capture payload built
// record by record, converted to Chrome JSON and gzip as the daemon stores
// it, then analysed.
#include <string>
#include <vector>

#include "daemon/analysis/analyze.h"
#include "daemon/analysis/occupancy.h"
#include "daemon/analysis/trace_reader.h"
#include "daemon/convert/chrome_trace.h"
#include "daemon/convert/gzip.h"
#include "daemon/convert/record_reader.h"
#include "daemon/convert/testing/payload_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::analysis {
namespace {

using gpuctl::testing::ApiCallSpec;
using gpuctl::testing::DeviceInfoSpec;
using gpuctl::testing::KernelSpec;
using gpuctl::testing::MemcpySpec;
using gpuctl::testing::PayloadBuilder;
using gpuctl::testing::SyncSpec;

constexpr int32_t kPid = 4242;
constexpr uint32_t kTid = 4243;
constexpr int64_t kUs = 1000;
constexpr int64_t kStart = 1'700'000'000'250'000'000;  // the window; base = .000
constexpr int64_t kEnd = kStart + 1'000 * kUs;

std::string ConvertToGzip(const std::vector<uint8_t>& payload) {
  daemon::RecordReaderOptions options;
  options.expected_pid = kPid;
  absl::StatusOr<daemon::DecodedRecords> records = daemon::ReadRecords(payload, options);
  EXPECT_TRUE(records.ok()) << records.status();
  daemon::ChromeTraceMeta meta;
  meta.trace_id = "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b";
  meta.host = "node1";
  meta.file_name = "node1-rank1-pid4242.json.gz";
  meta.process.set_pid(kPid);
  meta.process.set_rank(1);
  meta.process.set_world_size(2);
  daemon::StringSink sink;
  EXPECT_TRUE(daemon::WriteChromeTrace(*records, meta, &sink).ok());
  absl::StatusOr<std::string> gz = daemon::GzipCompress(sink.str());
  EXPECT_TRUE(gz.ok());
  return *gz;
}

void Launch(PayloadBuilder& b, uint32_t correlation, int64_t start, const char* name,
            int64_t dur = 5 * kUs) {
  b.AddApiCall(ApiCallSpec{.correlation = correlation,
                           .pid = static_cast<uint32_t>(kPid),
                           .tid = kTid,
                           .start_ns = start,
                           .end_ns = start + dur,
                           .name = name});
}

TEST(ConverterTest, HostBoundGapAndSyncOnTheConvertersOutput) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddStep(kTid, kStart, 1);
  b.AddStep(kTid, kStart + 600 * kUs, 2);  // the last step runs to the window's end
  Launch(b, 1, kStart + 10 * kUs, "cudaLaunchKernel");
  b.AddKernel(KernelSpec{.correlation = 1,
                         .name = "conv",
                         .start_ns = kStart + 20 * kUs,
                         .end_ns = kStart + 120 * kUs});
  b.AddRange(kTid, kStart + 120 * kUs, kStart + 300 * kUs, "DataLoader.__next__", 0, 1);
  Launch(b, 2, kStart + 310 * kUs, "cudaLaunchKernel");
  b.AddKernel(KernelSpec{.correlation = 2,
                         .name = "conv",
                         .start_ns = kStart + 320 * kUs,
                         .end_ns = kStart + 420 * kUs});
  Launch(b, 3, kStart + 330 * kUs, "cudaStreamSynchronize", 91 * kUs);
  b.AddSync(
      SyncSpec{.correlation = 3, .start_ns = kStart + 330 * kUs, .end_ns = kStart + 421 * kUs});
  Launch(b, 4, kStart + 430 * kUs, "cudaMemcpyAsync");
  b.AddMemcpy(MemcpySpec{.correlation = 4,
                         .src_kind = 1,  // Pageable
                         .start_ns = kStart + 440 * kUs,
                         .end_ns = kStart + 460 * kUs,
                         .bytes = 1'000'000});

  absl::StatusOr<TraceModel> model = ReadTraceBytes(ConvertToGzip(b.Build()), "converted.json.gz");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->info.format, TraceFormat::kGpuctl);
  EXPECT_TRUE(model->info.gzip);
  EXPECT_EQ(model->info.rank, 1);
  EXPECT_EQ(model->info.pid, kPid);
  EXPECT_EQ(model->info.window_start_ns, 250'000 * kUs);  // on the ts axis: base is .000
  EXPECT_EQ(model->info.window_end_ns, 251'000 * kUs);
  EXPECT_EQ(model->gpu_ops.size(), 3u);
  EXPECT_EQ(model->api_calls.size(), 4u);
  ASSERT_EQ(model->syncs.size(), 1u);
  EXPECT_EQ(model->syncs[0].stream, 7);  // "sync stream"; "stream" is -1
  EXPECT_EQ(model->steps.size(), 2u);

  TraceReport r = AnalyzeModel(*model, {});
  // GPU span 20 .. 460 µs: 200 µs of kernels, 20 µs of copy, no sync record.
  EXPECT_EQ(r.breakdown.process.span_ns(), 440 * kUs);
  EXPECT_EQ(r.breakdown.process.compute_ns, 200 * kUs);
  EXPECT_EQ(r.breakdown.process.memory_ns, 20 * kUs);
  const GapTotals& host = r.gaps.classes[static_cast<int>(GapClass::kHostBound)];
  EXPECT_EQ(host.count, 1u);
  EXPECT_EQ(host.gpu_idle_ns, 200 * kUs);
  ASSERT_FALSE(r.gaps.host_bound_ranges.empty());
  EXPECT_EQ(r.gaps.host_bound_ranges[0].name, "DataLoader.__next__");
  // The copy waited for the synchronize to return: a sync drain.
  EXPECT_EQ(r.gaps.classes[static_cast<int>(GapClass::kSyncDrain)].gpu_idle_ns, 20 * kUs);
  EXPECT_EQ(r.sync.host_ns, 91 * kUs);  // the call, counted once with its sync record
  EXPECT_EQ(r.copies.pageable_async_copies, 1u);
  ASSERT_EQ(r.breakdown.steps.size(), 2u);
  EXPECT_FALSE(r.breakdown.steps[0].clipped);
  EXPECT_TRUE(r.breakdown.steps[1].clipped);
  EXPECT_EQ(r.launch.kernels_per_step.count, 1u);
  EXPECT_EQ(r.launch.kernels_per_step.p50, 2);
}

// The converter's kineto-style launch args, read back into the model: a
// 66-block grid of 256 threads on a 132-SM H100 is half a block per SM,
// round(100 x 0.5 x 256 / 2048) = 6 % occupancy.
TEST(ConverterTest, LaunchArgsOfTheConvertersOutput) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddDeviceInfo(DeviceInfoSpec{});
  Launch(b, 1, kStart + 10 * kUs, "cudaLaunchKernel");
  b.AddKernel(KernelSpec{.correlation = 1,
                         .name = "gemm",
                         .start_ns = kStart + 20 * kUs,
                         .end_ns = kStart + 120 * kUs,
                         .grid = {66, 1, 1},
                         .block = {256, 1, 1},
                         .registers_per_thread = 32});
  absl::StatusOr<TraceModel> model = ReadTraceBytes(ConvertToGzip(b.Build()), "converted.json.gz");
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->gpu_ops.size(), 1u);
  ASSERT_NE(model->gpu_ops[0].launch, kNoLaunch);
  const KernelLaunch& l = model->launches[model->gpu_ops[0].launch];
  EXPECT_FLOAT_EQ(l.blocks_per_sm, 0.5f);
  EXPECT_FLOAT_EQ(l.warps_per_sm, 4.0f);
  EXPECT_EQ(l.occupancy_pct, 6);
  EXPECT_EQ(l.grid_blocks, 66u);
  EXPECT_EQ(l.block_threads, 256u);
  EXPECT_EQ(l.registers_per_thread, 32u);
  const OccupancyStats stats = ComputeOccupancy(*model);
  ASSERT_EQ(stats.devices.size(), 1u);
  EXPECT_DOUBLE_EQ(stats.devices[0].sm_efficiency_pct, 50);
  EXPECT_DOUBLE_EQ(stats.devices[0].occupancy_pct, 6);
}

}  // namespace
}  // namespace gpuctl::analysis
