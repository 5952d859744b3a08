#include "daemon/analysis/launch_queue.h"

#include <string>
#include <vector>

#include "daemon/analysis/analyze.h"
#include "daemon/analysis/model_index.h"
#include "daemon/analysis/report.h"
#include "daemon/analysis/testing/trace_builder.h"
#include "daemon/analysis/trace_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::analysis::launch_queue_test {
namespace {

using ::gpuctl::analysis::testing::TraceBuilder;
using ::testing::HasSubstr;

constexpr int64_t kUs = 1000;

// Stream 7: six 1 µs launch calls at 0..5 µs of 100 µs kernels that run
// back to back from 10 µs, then one more launch at 1 ms when all are done.
// Stream 9: one async copy. Stream 11: a synchronous copy (not queued), and
// stream 7 also runs a graph kernel (one graph launch queues many).
std::string QueueTrace() {
  TraceBuilder b;
  b.Gpuctl({});
  for (int i = 0; i < 6; ++i) {
    b.Runtime("cudaLaunchKernel", i * kUs, 1 * kUs, 10 + i);
    b.Kernel("gemm", (10 + 100 * int64_t{i}) * kUs, 100 * kUs, 10 + i);
  }
  b.Runtime("cudaLaunchKernel", 1000 * kUs, 1 * kUs, 20);
  b.Kernel("gemm", 1005 * kUs, 10 * kUs, 20);
  b.Runtime("cudaMemcpyAsync", 2 * kUs, 1 * kUs, 30);
  b.Memcpy("Memcpy HtoD (Pinned -> Device)", 20 * kUs, 10 * kUs, 30, 4096, 9);
  b.Runtime("cudaMemcpy", 3 * kUs, 20 * kUs, 31);
  b.Memcpy("Memcpy HtoD (Pinned -> Device)", 5 * kUs, 10 * kUs, 31, 4096, 11);
  return b.Json();
}

TraceModel ReadQueueModel() {
  absl::StatusOr<TraceModel> model = ReadTraceBytes(QueueTrace(), "queue.json");
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : TraceModel{};
}

TEST(LaunchQueueTest, DepthAtEachLaunchPerStream) {
  const TraceModel model = ReadQueueModel();
  const ModelIndex index(model);
  const LaunchQueueStats stats = ComputeLaunchQueues(model, index, 4);
  ASSERT_EQ(stats.streams.size(), 2u);  // the synchronous copy's stream is not queued
  const StreamQueue& s7 = stats.streams[0];
  EXPECT_EQ(s7.stream, 7);
  // Depths 0, 1, 2, 3, 4, 5 and 0 at the late launch.
  EXPECT_EQ(s7.depth.count, 7u);
  EXPECT_EQ(s7.depth.max, 5);
  EXPECT_EQ(s7.depth.p99, 5);
  EXPECT_EQ(s7.depth.p50, 2);
  EXPECT_EQ(s7.full_launches, 2u);  // at depths 4 and 5
  EXPECT_EQ(s7.full_launch_host_ns, 2 * kUs);
  EXPECT_EQ(s7.deepest.start_ns, 5 * kUs);
  EXPECT_EQ(stats.streams[1].stream, 9);
  EXPECT_EQ(stats.streams[1].depth.max, 0);
}

TEST(LaunchQueueTest, FindingAtTheLimit) {
  AnalyzeOptions options;
  options.launch_queue_limit = 5;
  TraceReport r = AnalyzeModel(ReadQueueModel(), options);
  const Finding* full = nullptr;
  for (const Finding& f : r.findings) {
    if (f.id == "launch_queue_full") full = &f;
  }
  ASSERT_NE(full, nullptr);
  EXPECT_EQ(full->recoverable_ns, 1 * kUs);  // the one launch at depth 5
  EXPECT_EQ(full->at.start_ns, 5 * kUs);
  EXPECT_THAT(full->title, HasSubstr("GPU 0 stream 7 had 5 launched ops not yet finished (p99 5)"));

  options.launch_queue_limit = 6;
  r = AnalyzeModel(ReadQueueModel(), options);
  for (const Finding& f : r.findings) EXPECT_NE(f.id, "launch_queue_full");
  nlohmann::json doc = nlohmann::json::parse(RenderJson({r}, r.findings, {}, options));
  EXPECT_EQ(doc["traces"][0]["launch_queue"]["streams"][0]["depth"]["max"], 5);
  EXPECT_EQ(doc["options"]["launch_queue_limit"], 6);
}

}  // namespace
}  // namespace gpuctl::analysis::launch_queue_test
