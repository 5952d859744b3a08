// The manifest summary ProcessCapture computes while converting, against
// `gpuctl analyze`'s path on the file it stored (read back, analysed).
#include "daemon/core/ingest_summary.h"

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "daemon/analysis/analyze.h"
#include "daemon/analysis/trace_reader.h"
#include "daemon/convert/testing/payload_builder.h"
#include "daemon/core/capture_processor.h"
#include "daemon/core/testing/vector_payload.h"
#include "daemon/store/local_store.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::gpuctl::testing::PayloadBuilder;

constexpr int32_t kPid = 4242;
constexpr uint32_t kTid = 4243;
constexpr int64_t kUs = 1000;
constexpr int64_t kStart = 1704067200'250'000'000;
constexpr int64_t kEnd = kStart + 10'000 * kUs;
constexpr char kTraceId[] = "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b";

// A fresh directory, removed with what it holds.
class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "gpuctl-ingest-summary-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct Stored {
  v1::ProcessResult result;
  analysis::ProcessSummary analyzed;
};

Stored CaptureAndAnalyze(std::vector<uint8_t> payload, const std::string& dir) {
  auto store = LocalTraceStore::Create(dir);
  EXPECT_TRUE(store.ok()) << store.status();
  CaptureJob job;
  job.trace_id = kTraceId;
  job.host = "h";
  job.process.set_pid(kPid);
  job.process.set_rank(0);
  job.own_pid = kPid;
  job.file_name = "h-rank0-pid4242.json.gz";
  job.payload = std::make_unique<testing::VectorPayload>(std::move(payload));
  Stored out;
  out.result = ProcessCapture(std::move(job), store->get());
  EXPECT_EQ(out.result.status(), v1::CAPTURE_STATUS_OK) << out.result.message();
  auto model = analysis::ReadTraceFile((*store)->Location(kTraceId) + "/" + out.result.file());
  EXPECT_TRUE(model.ok()) << model.status();
  if (model.ok()) out.analyzed = analysis::AnalyzeModel(*model, {}).summary;
  return out;
}

void ExpectEqual(const v1::ProcessSummary& stored, const analysis::ProcessSummary& analyzed) {
  EXPECT_EQ(stored.gpu_span_ns(), analyzed.gpu_span_ns);
  EXPECT_EQ(stored.compute_ns(), analyzed.compute_ns);
  EXPECT_EQ(stored.communication_ns(), analyzed.communication_ns);
  EXPECT_EQ(stored.memory_ns(), analyzed.memory_ns);
  EXPECT_EQ(stored.idle_ns(), analyzed.idle_ns);
  EXPECT_EQ(stored.steps(), analyzed.steps);
  EXPECT_EQ(stored.step_p50_ns(), analyzed.step_p50_ns);
  EXPECT_EQ(stored.step_p99_ns(), analyzed.step_p99_ns);
  EXPECT_EQ(stored.top_kernel(), analyzed.top_kernel);
  EXPECT_EQ(stored.top_kernel_ns(), analyzed.top_kernel_ns);
  EXPECT_EQ(stored.top_kernel_count(), analyzed.top_kernel_count);
}

TEST(IngestSummaryTest, TheManifestSummaryIsWhatAnalyzeFindsInTheStoredFile) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddDeviceInfo({.device = 0});
  b.AddCaptureInfo({});
  // Steps 1-3 every 1 ms from 1 ms; step 3 runs to the window's end.
  for (uint64_t step = 1; step <= 3; ++step) {
    b.AddStep(kTid, kStart + static_cast<int64_t>(step) * 1000 * kUs, step);
  }
  b.AddRange(kTid, kStart + 1000 * kUs, kStart + 1500 * kUs, "forward", 0, 1);
  // Step 1: gemm 1000-1400, NCCL 1300-1800; step 2: gemm 2000-2200, a copy
  // 2200-2300 and a Stream Sync (host time) 2300-2900.
  b.AddKernel({.stream = 7,
               .correlation = 1,
               .name = "gemm\xff",
               .start_ns = kStart + 1000 * kUs,
               .end_ns = kStart + 1400 * kUs});
  b.AddKernel({.stream = 9,
               .correlation = 2,
               .name = "ncclDevKernel_AllReduce",
               .start_ns = kStart + 1300 * kUs,
               .end_ns = kStart + 1800 * kUs});
  b.AddKernel({.stream = 7,
               .correlation = 3,
               .name = "gemm\xff",
               .start_ns = kStart + 2000 * kUs,
               .end_ns = kStart + 2200 * kUs});
  b.AddMemcpy({.stream = 8,
               .correlation = 4,
               .start_ns = kStart + 2200 * kUs,
               .end_ns = kStart + 2300 * kUs,
               .bytes = 1 << 20});
  b.AddSync({.stream = 7,
             .correlation = 5,
             .start_ns = kStart + 2300 * kUs,
             .end_ns = kStart + 2900 * kUs});
  Stored s = CaptureAndAnalyze(b.Build(), dir.path());
  ASSERT_TRUE(s.result.has_summary());
  const v1::ProcessSummary& sum = s.result.summary();
  ExpectEqual(sum, s.analyzed);
  // By hand: span 1000-2300; compute 1000-1400, 2000-2200; NCCL alone
  // 1400-1800; copy 2200-2300; idle 1800-2000 (the sync is not GPU time).
  EXPECT_EQ(sum.gpu_span_ns(), 1300 * kUs);
  EXPECT_EQ(sum.compute_ns(), 600 * kUs);
  EXPECT_EQ(sum.communication_ns(), 400 * kUs);
  EXPECT_EQ(sum.memory_ns(), 100 * kUs);
  EXPECT_EQ(sum.idle_ns(), 200 * kUs);
  EXPECT_EQ(sum.steps(), 2u);  // step 3 ends at the window's end
  EXPECT_EQ(sum.step_p50_ns(), 1000 * kUs);
  EXPECT_EQ(sum.step_p99_ns(), 1000 * kUs);
  // The name as the file holds it: invalid UTF-8 repaired.
  EXPECT_EQ(sum.top_kernel(), "gemm\xef\xbf\xbd");
  EXPECT_EQ(sum.top_kernel_ns(), 600 * kUs);
  EXPECT_EQ(sum.top_kernel_count(), 2u);
}

TEST(IngestSummaryTest, AHostOnlyTraceHasAnEmptySummary) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddStep(kTid, kStart + 100 * kUs, 1);
  b.AddStep(kTid, kStart + 400 * kUs, 2);
  Stored s = CaptureAndAnalyze(b.Build(), dir.path());
  ASSERT_TRUE(s.result.has_summary());
  ExpectEqual(s.result.summary(), s.analyzed);
  EXPECT_EQ(s.result.summary().gpu_span_ns(), 0);
  EXPECT_EQ(s.result.summary().top_kernel(), "");
  EXPECT_EQ(s.result.summary().steps(), 1u);
  EXPECT_EQ(s.result.summary().step_p50_ns(), 300 * kUs);
}

}  // namespace
}  // namespace gpuctl::daemon
