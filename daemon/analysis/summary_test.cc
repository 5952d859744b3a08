// The summary accumulator, fed event by event as gpuctld's converter feeds
// it, against `gpuctl analyze`'s path (the same events written as a trace
// file, read back and analysed) and against numbers worked out by hand.
#include "daemon/analysis/summary.h"

#include <string>

#include "daemon/analysis/analyze.h"
#include "daemon/analysis/testing/trace_builder.h"
#include "daemon/analysis/trace_reader.h"
#include "gtest/gtest.h"

namespace gpuctl::analysis::summary_test {
namespace {

using OpType = SummaryAccumulator::OpType;
using analysis::testing::TraceBuilder;

constexpr int64_t kUs = 1000;
constexpr int64_t kWindowEnd = 10'000 * kUs;

// Feeds both: the accumulator, and a trace file in gpuctl's layout.
class BothPaths {
 public:
  BothPaths() {
    acc_.SetWindow(0, kWindowEnd);
    file_.Gpuctl({.window_start_ns = 0, .window_end_ns = kWindowEnd});
  }
  BothPaths& Kernel(uint32_t key, const std::string& name, int64_t start_us, int64_t end_us,
                    uint32_t stream = 7, uint32_t device = 0) {
    acc_.AddGpuOp(OpType::kKernel, device, stream, key, name, start_us * kUs, end_us * kUs);
    file_.Kernel(name, start_us * kUs, (end_us - start_us) * kUs, ++correlation_, stream, device);
    return *this;
  }
  BothPaths& Memcpy(int64_t start_us, int64_t end_us, uint32_t stream = 8) {
    acc_.AddGpuOp(OpType::kMemcpy, 0, stream, 0, "", start_us * kUs, end_us * kUs);
    file_.Memcpy("Memcpy HtoD (Pinned -> Device)", start_us * kUs, (end_us - start_us) * kUs,
                 ++correlation_, 4096, stream);
    return *this;
  }
  BothPaths& Memset(int64_t start_us, int64_t end_us, uint32_t stream = 8) {
    acc_.AddGpuOp(OpType::kMemset, 0, stream, 0, "", start_us * kUs, end_us * kUs);
    file_.Memset(start_us * kUs, (end_us - start_us) * kUs, ++correlation_, 4096, stream);
    return *this;
  }
  BothPaths& Annotation(const std::string& name, uint32_t tid, int64_t start_us, int64_t end_us) {
    acc_.AddAnnotation(name, tid, start_us * kUs, end_us * kUs);
    file_.Range(name, start_us * kUs, (end_us - start_us) * kUs, tid);
    return *this;
  }
  ProcessSummary Accumulated() { return acc_.Finish(); }
  ProcessSummary Analyzed() const {
    absl::StatusOr<TraceModel> model = ReadTraceBytes(file_.Json(), "trace.json");
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? AnalyzeModel(*model, {}).summary : ProcessSummary{};
  }

 private:
  SummaryAccumulator acc_;
  TraceBuilder file_;
  uint64_t correlation_ = 0;
};

void ExpectSame(const ProcessSummary& a, const ProcessSummary& b) {
  EXPECT_EQ(a.gpu_span_ns, b.gpu_span_ns);
  EXPECT_EQ(a.compute_ns, b.compute_ns);
  EXPECT_EQ(a.communication_ns, b.communication_ns);
  EXPECT_EQ(a.memory_ns, b.memory_ns);
  EXPECT_EQ(a.idle_ns, b.idle_ns);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.step_p50_ns, b.step_p50_ns);
  EXPECT_EQ(a.step_p99_ns, b.step_p99_ns);
  EXPECT_EQ(a.top_kernel, b.top_kernel);
  EXPECT_EQ(a.top_kernel_ns, b.top_kernel_ns);
  EXPECT_EQ(a.top_kernel_count, b.top_kernel_count);
}

TEST(SummaryAccumulatorTest, TwoGpusStepsAndNcclAsAnalyzeComputesThem) {
  BothPaths p;
  // GPU 0: gemm 100-300 and 400-500 (one name under two keys, as two
  // string table entries would hold it), NCCL 250-450 on another stream, a
  // copy 500-600. GPU 1: softmax 1000-1100.
  p.Kernel(1, "gemm", 100, 300)
      .Kernel(9, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 250, 450, /*stream=*/9)
      .Kernel(2, "gemm", 400, 500)
      .Memcpy(500, 550)
      .Memset(550, 600)
      .Kernel(3, "softmax", 1000, 1100, /*stream=*/7, /*device=*/1);
  // Steps on two threads, merged by number: #1 0-420, #2 420-1000; #3 ends
  // at the window's end, cut by it.
  p.Annotation("ProfilerStep#1", 1, 0, 400)
      .Annotation("ProfilerStep#1", 2, 50, 420)
      .Annotation("forward", 1, 10, 200)
      .Annotation("ProfilerStep#2", 1, 420, 1000)
      .Annotation("ProfilerStep#3", 1, 1000, kWindowEnd / kUs);
  const ProcessSummary analyzed = p.Analyzed();
  const ProcessSummary s = p.Accumulated();
  ExpectSame(s, analyzed);
  // By hand: span 100-1100; compute 100-300, 400-500 (over the NCCL
  // kernel), 1000-1100; NCCL alone 300-400; memory 500-600; idle 600-1000.
  EXPECT_EQ(s.gpu_span_ns, 1000 * kUs);
  EXPECT_EQ(s.compute_ns, 400 * kUs);
  EXPECT_EQ(s.communication_ns, 100 * kUs);
  EXPECT_EQ(s.memory_ns, 100 * kUs);
  EXPECT_EQ(s.idle_ns, 400 * kUs);
  EXPECT_EQ(s.busy_ns(), 600 * kUs);
  EXPECT_EQ(s.steps, 2u);
  EXPECT_EQ(s.step_p50_ns, 420 * kUs);  // nearest rank of {420, 580}
  EXPECT_EQ(s.step_p99_ns, 580 * kUs);
  EXPECT_EQ(s.top_kernel, "gemm");
  EXPECT_EQ(s.top_kernel_ns, 300 * kUs);
  EXPECT_EQ(s.top_kernel_count, 2u);
}

TEST(SummaryAccumulatorTest, NcclKernelCanBeTheTopKernel) {
  BothPaths p;
  p.Kernel(4, "relu", 0, 10).Kernel(5, "ncclKernel_Broadcast", 20, 500, /*stream=*/3);
  const ProcessSummary analyzed = p.Analyzed();
  const ProcessSummary s = p.Accumulated();
  ExpectSame(s, analyzed);
  EXPECT_EQ(s.top_kernel, "ncclKernel_Broadcast");
  EXPECT_EQ(s.communication_ns, 480 * kUs);
  EXPECT_EQ(s.idle_ns, 10 * kUs);
  EXPECT_EQ(s.steps, 0u);
}

TEST(SummaryAccumulatorTest, NoGpuWorkIsAllZero) {
  BothPaths p;
  p.Annotation("ProfilerStep#7", 1, 0, 300).Annotation("ProfilerStep#8", 1, 300, 700);
  const ProcessSummary analyzed = p.Analyzed();
  const ProcessSummary s = p.Accumulated();
  ExpectSame(s, analyzed);
  EXPECT_EQ(s.gpu_span_ns, 0);
  EXPECT_EQ(s.busy_ns(), 0);
  EXPECT_TRUE(s.top_kernel.empty());
  EXPECT_EQ(s.steps, 2u);
  EXPECT_EQ(s.step_p99_ns, 400 * kUs);
}

TEST(SummaryAccumulatorTest, FinishLeavesAnEmptyAccumulator) {
  SummaryAccumulator acc;
  acc.SetWindow(0, kWindowEnd);
  acc.AddGpuOp(OpType::kKernel, 0, 7, 1, "gemm", 0, 100);
  EXPECT_EQ(acc.Finish().top_kernel, "gemm");
  const ProcessSummary again = acc.Finish();
  EXPECT_EQ(again.gpu_span_ns, 0);
  EXPECT_TRUE(again.top_kernel.empty());
}

}  // namespace
}  // namespace gpuctl::analysis::summary_test
