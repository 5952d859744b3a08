#include "daemon/analysis/trace_reader.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/analysis/testing/trace_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::analysis {
namespace {

using testing::GzipMembers;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::TraceBuilder;

std::string SmallTrace() {
  TraceBuilder b;
  b.Gpuctl({.rank = 3, .dropped_events = 5, .window_start_ns = 1'000, .window_end_ns = 900'000});
  b.Runtime("cudaLaunchKernel_v7000", 10'000, 5'000, 17);
  b.Kernel("gemm", 20'000, 100'000, 17);
  b.Kernel("ncclDevKernel_AllReduce", 130'000, 50'000, 18, /*stream=*/9);
  b.Memcpy("Memcpy HtoD (Pageable -> Device)", 200'000, 10'000, 19, 4096);
  b.Sync("Stream Sync", 300'000, 20'000, 20);
  b.Range("forward", 5'000, 400'000);
  b.Step(4, 1'000, 800'000);
  return b.Json();
}

TEST(TraceReaderTest, ReadsGpuctlTraceIntoTheModel) {
  absl::StatusOr<TraceModel> m = ReadTraceBytes(SmallTrace(), "t.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->info.format, TraceFormat::kGpuctl);
  EXPECT_EQ(m->info.rank, 3);
  EXPECT_EQ(m->info.host, "node1");
  EXPECT_EQ(m->info.dropped_events, 5u);
  EXPECT_TRUE(m->info.has_window);
  EXPECT_EQ(m->info.window_start_ns, 1'000);
  EXPECT_EQ(m->info.window_end_ns, 900'000);
  EXPECT_THAT(m->info.activities, ::testing::Contains("runtime"));
  ASSERT_EQ(m->gpu_ops.size(), 3u);
  EXPECT_EQ(m->Name(m->gpu_ops[0].name), "gemm");
  EXPECT_EQ(m->gpu_ops[0].start_ns, 20'000);
  EXPECT_EQ(m->gpu_ops[0].end_ns, 120'000);
  EXPECT_EQ(m->gpu_ops[0].correlation, 17u);
  EXPECT_EQ(m->gpu_ops[0].kind, GpuOpKind::kKernel);
  EXPECT_EQ(m->gpu_ops[1].kind, GpuOpKind::kMemcpy);
  EXPECT_EQ(m->gpu_ops[1].direction, CopyDirection::kHtoD);
  EXPECT_TRUE(m->gpu_ops[1].pageable);
  EXPECT_EQ(m->gpu_ops[1].bytes, 4096u);
  EXPECT_EQ(m->gpu_ops[2].kind, GpuOpKind::kCommKernel);
  EXPECT_EQ(m->gpu_ops[2].stream, 9);
  ASSERT_EQ(m->api_calls.size(), 1u);
  EXPECT_EQ(m->api_calls[0].kind, ApiKind::kKernelLaunch);
  EXPECT_EQ(m->api_calls[0].tid, TraceBuilder::kTid);
  ASSERT_EQ(m->syncs.size(), 1u);
  EXPECT_EQ(m->syncs[0].stream, 7);
  ASSERT_EQ(m->ranges.size(), 1u);
  ASSERT_EQ(m->steps.size(), 1u);
  EXPECT_EQ(m->steps[0].number, 4);
}

TEST(TraceReaderTest, TimesAreExactNanoseconds) {
  TraceBuilder b;
  b.Raw(R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,)"
        R"( "ts": 5370715567574.456, "dur": 1.0005, "args": {"stream": 7}})");
  b.Raw(R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,)"
        R"( "ts": 5370715567580, "dur": 2e-3, "args": {"stream": 7}})");
  absl::StatusOr<TraceModel> m = ReadTraceBytes(b.Json(), "t.json");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->gpu_ops.size(), 2u);
  EXPECT_EQ(m->gpu_ops[0].start_ns, 5370715567574456);
  EXPECT_EQ(m->gpu_ops[0].end_ns, 5370715567574456 + 1001);
  EXPECT_EQ(m->gpu_ops[1].start_ns, 5370715567580000);
  EXPECT_EQ(m->gpu_ops[1].end_ns, 5370715567580002);
  EXPECT_EQ(m->info.format, TraceFormat::kKineto);
}

// The common members are read straight from their tokens when written
// plainly; every other valid form reads to the same values, and what is not
// a number is still malformed JSON.
TEST(TraceReaderTest, EveryValidFormOfAMemberReadsAlike) {
  const char* const kPlain =
      R"({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 12, "tid": -3,)"
      R"( "ts": 1500, "dur": 2.25, "args": {"stream": 7, "device": 1, "correlation": 40,)"
      R"( "grid": [4, 2, 1], "block": [128, 1, 1]}})";
  const char* const kOtherForms =
      R"({"ph": "X", "cat": "kernel", "name": "gemm", "pid": "12", "tid": -3.0,)"
      R"( "ts": 1.5e3, "dur": 225e-2, "args": {"stream": "7", "device": 1.0, "correlation": 4e1,)"
      R"( "grid": [4.0, "2", 1], "block": [1.28E2, 1, 1]}})";
  for (const char* event : {kPlain, kOtherForms}) {
    TraceBuilder b;
    b.Raw(event);
    absl::StatusOr<TraceModel> m = ReadTraceBytes(b.Json(), "t.json");
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_EQ(m->gpu_ops.size(), 1u) << event;
    const GpuOp& op = m->gpu_ops[0];
    EXPECT_EQ(m->Name(op.name), "gemm") << event;
    EXPECT_EQ(op.kind, GpuOpKind::kKernel) << event;
    EXPECT_EQ(op.start_ns, 1'500'000) << event;
    EXPECT_EQ(op.end_ns, 1'502'250) << event;
    EXPECT_EQ(op.stream, 7) << event;
    EXPECT_EQ(op.device, 1) << event;
    EXPECT_EQ(op.correlation, 40u) << event;
    ASSERT_NE(op.launch, kNoLaunch) << event;
    EXPECT_EQ(m->launches[op.launch].grid_blocks, 8u) << event;
    EXPECT_EQ(m->launches[op.launch].block_threads, 128u) << event;
  }
  // Not numbers at all. (Near-numbers such as 01, 1. or 0x10 are read as the
  // general path reads them, leniently, whether or not they are plain.)
  for (const char* number : {"-", "--1", ".5", "+1", "1x"}) {
    TraceBuilder b;
    b.Raw(absl::StrCat(R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 1,)",
                       R"( "ts": )", number, R"(, "dur": 1})"));
    absl::StatusOr<TraceModel> m = ReadTraceBytes(b.Json(), "t.json");
    EXPECT_FALSE(m.ok()) << number;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr("malformed JSON")) << number;
  }
}

TEST(TraceReaderTest, ReadsEveryGzipMember) {
  const std::string json = SmallTrace();
  absl::StatusOr<TraceModel> m = ReadTraceBytes(GzipMembers(json, 5), "t.json.gz");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->info.gzip);
  EXPECT_EQ(m->gpu_ops.size(), 3u);
  EXPECT_EQ(m->steps.size(), 1u);  // in the last member
}

TEST(TraceReaderTest, SkipsEventsWithoutUsableTimes) {
  TraceBuilder b;
  b.Raw(R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7})");
  b.Raw(R"({"ph": "X", "cat": "kernel", "name": "k", "ts": "12", "dur": 1})");
  b.Raw(R"({"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": -1})");
  b.Raw(R"({"ph": "X", "cat": "kernel", "name": "k", "ts": 1e300, "dur": 1})");
  b.Raw(R"({"ph": "i", "cat": "user_annotation", "name": "mark", "ts": 1, "s": "t"})");
  // Further than 2.8 hours from the first event, or longer.
  b.Kernel("first", 0, 1, 1);
  b.Kernel("far", 10'000'000'000'001, 1, 2);
  b.Kernel("long", 5, 10'000'000'000'001, 3);
  absl::StatusOr<TraceModel> m = ReadTraceBytes(b.Json(), "t.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->info.skipped_events, 6u);
  EXPECT_EQ(m->info.events, 9u);  // the builder's process_name included
  ASSERT_EQ(m->gpu_ops.size(), 1u);
  EXPECT_EQ(m->Name(m->gpu_ops[0].name), "first");
}

TEST(TraceReaderTest, MalformedJsonNamesFileAndOffset) {
  absl::StatusOr<TraceModel> m = ReadTraceBytes(R"({"traceEvents": [{"ph": "X",,}]})", "bad.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(m.status().message()), StartsWith("bad.json: malformed JSON at byte 28"));
}

TEST(TraceReaderTest, RejectsDocumentsThatAreNotTraces) {
  struct Case {
    const char* json;
    const char* error;
  } cases[] = {
      {"[]", "not a trace: the top level is not an object at byte 0"},
      {"{}", "no traceEvents array"},
      {R"({"traceEvents": {}})", "traceEvents is not an array"},
      {R"({"traceEvents": [1]})", "a traceEvents element is not an object"},
      {R"({"traceEvents": [], "traceEvents": []})", "a second traceEvents"},
      {"", "malformed JSON at byte 0"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<TraceModel> m = ReadTraceBytes(c.json, "x.json");
    ASSERT_FALSE(m.ok()) << c.json;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(c.error)) << c.json;
    EXPECT_THAT(std::string(m.status().message()), StartsWith("x.json: ")) << c.json;
  }
}

TEST(TraceReaderTest, EveryTruncationIsAnErrorNeverACrash) {
  const std::string json = SmallTrace();
  for (size_t n = 0; n < json.size(); n += 7) {
    absl::StatusOr<TraceModel> m = ReadTraceBytes(json.substr(0, n), "t.json");
    ASSERT_FALSE(m.ok()) << n;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  }
  const std::string gz = GzipMembers(json, 3);
  for (size_t n = 2; n < gz.size(); n += 5) {
    absl::StatusOr<TraceModel> m = ReadTraceBytes(gz.substr(0, n), "t.json.gz");
    ASSERT_FALSE(m.ok()) << n;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr("t.json.gz: "));
  }
}

TEST(TraceReaderTest, TruncatedAndCorruptGzipNameTheCompressedOffset) {
  const std::string gz = GzipMembers(SmallTrace(), 2);
  absl::StatusOr<TraceModel> cut = ReadTraceBytes(gz.substr(0, gz.size() - 10), "t.json.gz");
  ASSERT_FALSE(cut.ok());
  EXPECT_THAT(std::string(cut.status().message()),
              HasSubstr(absl::StrCat("truncated gzip data: the file ends inside a member at byte ",
                                     gz.size() - 10)));
  std::string corrupt = gz;
  corrupt[20] ^= 0x5a;
  corrupt[21] = static_cast<char>(static_cast<unsigned char>(corrupt[21]) ^ 0xa5U);
  absl::StatusOr<TraceModel> bad = ReadTraceBytes(corrupt, "t.json.gz");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("t.json.gz: "));
  std::string trailing = gz + "garbage";
  absl::StatusOr<TraceModel> junk = ReadTraceBytes(trailing, "t.json.gz");
  ASSERT_FALSE(junk.ok());
  EXPECT_THAT(
      std::string(junk.status().message()),
      HasSubstr(absl::StrCat("corrupt gzip data in the member starting at byte ", gz.size())));
}

TEST(TraceReaderTest, MissingFileIsNotFound) {
  absl::StatusOr<TraceModel> m = ReadTraceFile("/nonexistent/trace.json.gz");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("/nonexistent/trace.json.gz"));
}

TEST(TraceReaderTest, ReadsKinetoFixtures) {
  for (const char* name : {"torch_profiler_cpu.json", "on_demand_cpu.json"}) {
    const std::string path = absl::StrCat(GPUCTL_KINETO_FIXTURE_DIR, "/", name);
    absl::StatusOr<TraceModel> m = ReadTraceFile(path);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->info.format, TraceFormat::kKineto);
    EXPECT_TRUE(m->info.has_window);  // kineto's "Trace" span
    EXPECT_TRUE(m->gpu_ops.empty());
    EXPECT_GT(m->ranges.size(), 300u);
    EXPECT_EQ(m->info.skipped_events, 0u);
  }
  // Ranges: 348 cpu_op + 9 user_annotation events in this fixture.
  absl::StatusOr<TraceModel> m =
      ReadTraceFile(absl::StrCat(GPUCTL_KINETO_FIXTURE_DIR, "/torch_profiler_cpu.json"));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->ranges.size(), 357u);
}

}  // namespace
}  // namespace gpuctl::analysis
