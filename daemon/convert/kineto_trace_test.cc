#include "daemon/convert/kineto_trace.h"

#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/convert/gzip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

std::string ReadFixture(const char* name = "torch_profiler_cpu.json") {
  std::ifstream in(std::string(GPUCTL_KINETO_FIXTURE_DIR) + "/" + name, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

KinetoTraceTag Tag(int32_t rank = 3) {
  return KinetoTraceTag{.trace_id = "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b",
                        .host = "node7",
                        .rank = rank,
                        .pid = 4242,
                        .job_id = "job-42"};
}

std::string Unzip(const KinetoConverted& c) {
  auto text = GzipDecompress(c.gzip);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : std::string();
}

absl::Status ConvertError(absl::string_view json) {
  auto c = ConvertKinetoTrace(json, Tag(), 1);
  return c.ok() ? absl::OkStatus() : c.status();
}

TEST(KinetoTraceTest, RealTraceIsKeptWholeAndTagged) {
  const std::string original = ReadFixture();
  ASSERT_GT(original.size(), 10000u);
  auto c = ConvertKinetoTrace(original, Tag(), 6);
  ASSERT_TRUE(c.ok()) << c.status();
  Json in = Json::parse(original);
  Json out = Json::parse(Unzip(*c));

  EXPECT_EQ(out["gpuctl"], Json::parse(R"({"trace_id": "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b",
      "host": "node7", "rank": 3, "pid": 4242, "job_id": "job-42"})"));
  EXPECT_EQ(out["distributedInfo"], Json::parse(R"({"rank": 3})"));
  // Everything kineto wrote is there, unchanged, events in order.
  for (const auto& [key, value] : in.items()) EXPECT_EQ(out[key], value) << key;
  EXPECT_EQ(out.size(), in.size() + 2);

  uint64_t cpu_ops = 0;
  for (const Json& e : in["traceEvents"]) cpu_ops += e.value("cat", "") == "cpu_op";
  EXPECT_EQ(c->summary.event_count, in["traceEvents"].size());
  EXPECT_EQ(c->summary.cpu_op_count, cpu_ops);
  EXPECT_GT(cpu_ops, 300u);
  EXPECT_EQ(c->summary.kernel_count, 0u);
  EXPECT_EQ(c->summary.trace_id_in_file, in["trace_id"].get<std::string>());
  // Compressed well below kineto's indented text.
  EXPECT_LT(c->gzip.size(), original.size() / 10);
}

TEST(KinetoTraceTest, AnOnDemandTraceEchoesTheRequestedTraceId) {
  // Written by libkineto when a daemon asked with REQUEST_TRACE_ID.
  const std::string original = ReadFixture("on_demand_cpu.json");
  ASSERT_GT(original.size(), 10000u);
  auto c = ConvertKinetoTrace(original, Tag(), 6);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->summary.trace_id_in_file, "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b");
  EXPECT_GT(c->summary.cpu_op_count, 100u);
  // The window asked for was 400 ms.
  EXPECT_NEAR(static_cast<double>(c->summary.last_ts_unix_ns - c->summary.first_ts_unix_ns), 400e6,
              50e6);
  Json out = Json::parse(Unzip(*c));
  EXPECT_EQ(out["distributedInfo"]["rank"], 3);
  EXPECT_EQ(out["traceEvents"], Json::parse(original)["traceEvents"]);
}

TEST(KinetoTraceTest, SummaryTimesAreUnixNanoseconds) {
  const std::string original = ReadFixture();
  auto c = ConvertKinetoTrace(original, Tag(), 1);
  ASSERT_TRUE(c.ok()) << c.status();
  Json in = Json::parse(original);
  const int64_t base = in["baseTimeNanoseconds"].get<int64_t>();
  double first = 1e300, last = -1e300;
  for (const Json& e : in["traceEvents"]) {
    if (e["ph"] == "M") continue;
    double ts = e["ts"].get<double>();
    first = std::min(first, ts);
    last = std::max(last, ts + e.value("dur", 0.0));
  }
  EXPECT_NEAR(c->summary.first_ts_unix_ns, base + first * 1000, 2);
  EXPECT_NEAR(c->summary.last_ts_unix_ns, base + last * 1000, 2);
  // A real trace of today, not 1970.
  EXPECT_GT(c->summary.first_ts_unix_ns, int64_t{1'700'000'000} * 1'000'000'000);
  EXPECT_LT(c->summary.first_ts_unix_ns, c->summary.last_ts_unix_ns);

  auto small = ConvertKinetoTrace(R"({"baseTimeNanoseconds": 1000000000, "traceEvents": [
      {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}},
      {"ph": "X", "cat": "kernel", "ts": 2.5, "dur": 1.25},
      {"ph": "i", "ts": 1}]})",
                                  Tag(), 1);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->summary.first_ts_unix_ns, 1'000'001'000);
  EXPECT_EQ(small->summary.last_ts_unix_ns, 1'000'003'750);
  EXPECT_EQ(small->summary.event_count, 3u);
  EXPECT_EQ(small->summary.kernel_count, 1u);
  // No profiler span: the window is unknown.
  EXPECT_EQ(small->summary.window_start_unix_ns, 0);
  EXPECT_EQ(small->summary.window_end_unix_ns, 0);
}

TEST(KinetoTraceTest, TheWindowIsKinetosOwnProfilerSpan) {
  // libkineto writes one "PyTorch Profiler (N)" span of `cat` "Trace" per
  // window (per iteration in iteration mode): when it really recorded.
  const std::string original = ReadFixture("on_demand_cpu.json");
  auto c = ConvertKinetoTrace(original, Tag(), 1);
  ASSERT_TRUE(c.ok()) << c.status();
  Json in = Json::parse(original);
  const int64_t base = in["baseTimeNanoseconds"].get<int64_t>();
  const Json* span = nullptr;
  for (const Json& e : in["traceEvents"]) {
    if (e.value("cat", "") == "Trace") span = &e;
  }
  ASSERT_NE(span, nullptr);
  const double ts = (*span)["ts"].get<double>(), dur = (*span)["dur"].get<double>();
  EXPECT_NEAR(c->summary.window_start_unix_ns, base + ts * 1000, 2);
  EXPECT_NEAR(c->summary.window_end_unix_ns, base + (ts + dur) * 1000, 2);
  EXPECT_NEAR(static_cast<double>(c->summary.window_end_unix_ns - c->summary.window_start_unix_ns),
              400e6, 10e6);

  // Two iteration spans: earliest start to latest end, whatever the order.
  auto two = ConvertKinetoTrace(R"j({"baseTimeNanoseconds": 1000000000, "traceEvents": [
      {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (1)", "ts": 20, "dur": 5},
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 9, "dur": 30},
      {"ph": "X", "name": "PyTorch Profiler (0)", "ts": 10, "dur": 10, "cat": "Trace"}]})j",
                                Tag(), 1);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->summary.window_start_unix_ns, 1'000'010'000);
  EXPECT_EQ(two->summary.window_end_unix_ns, 1'000'025'000);
}

TEST(KinetoTraceTest, CountsTheOptimizerStepsKinetoRecorded) {
  // PyTorch's optimizer.step() ranges, in either member order; a cpu_op or
  // another range of the name is not one.
  auto c = ConvertKinetoTrace(R"j({"traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "ts": 1, "dur": 1},
      {"ph": "X", "name": "Optimizer.step#Adam.step", "ts": 3, "dur": 1, "cat": "user_annotation"},
      {"ph": "X", "cat": "cpu_op", "name": "Optimizer.step#SGD.step", "ts": 5, "dur": 1},
      {"ph": "X", "cat": "user_annotation", "name": "Optimizer.zero_grad#SGD.zero_grad", "ts": 7},
      {"ph": "X", "cat": "user_annotation", "name": "train_step", "ts": 0, "dur": 9,
       "args": {"name": "Optimizer.step#SGD.step"}}]})j",
                              Tag(), 1);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->summary.optimizer_steps, 2u);
  // A real PyTorch 2.15 on-demand trace of a loop (four optimizer steps).
  auto real = ConvertKinetoTrace(ReadFixture("on_demand_cpu.json"), Tag(), 1);
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_EQ(real->summary.optimizer_steps, 4u);
}

TEST(KinetoTraceTest, HolisticTraceAnalysisFindsTheRankOnTheFirstLine) {
  auto c = ConvertKinetoTrace(ReadFixture(), Tag(5), 1);
  ASSERT_TRUE(c.ok()) << c.status();
  std::string text = Unzip(*c);
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  // HTA reads line by line until r'"rank":\s+(\d+)' matches.
  const std::regex rank_re(R"re("rank":\s+(\d+))re");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(lines[0], m, rank_re)) << lines[0];
  EXPECT_EQ(m[1], "5");
  // One event per line: no line holds the whole file.
  EXPECT_GT(lines.size(), 400u);
}

TEST(KinetoTraceTest, KeepsKinetosOwnDistributedInfo) {
  auto c = ConvertKinetoTrace(R"({"traceEvents": [],
      "distributedInfo": {"backend": "gloo", "rank": 1, "world_size": 2}})",
                              Tag(1), 1);
  ASSERT_TRUE(c.ok()) << c.status();
  std::string text = Unzip(*c);
  Json out = Json::parse(text);
  EXPECT_EQ(out["distributedInfo"]["backend"], "gloo");
  size_t count = 0;
  for (size_t at = 0; (at = text.find("\"distributedInfo\"", at)) != std::string::npos; ++at) {
    ++count;
  }
  EXPECT_EQ(count, 1u);
}

TEST(KinetoTraceTest, TheFilesOwnGpuctlMemberCannotForgeTheTag) {
  auto c = ConvertKinetoTrace(
      R"({"gpuctl": {"trace_id": "forged", "rank": 0, "nested": [[{"x": 1}]]},
          "traceEvents": [{"ph": "i", "ts": 1}], "gpuctl": "again", "traceName": "t"})",
      Tag(), 1);
  ASSERT_TRUE(c.ok()) << c.status();
  std::string text = Unzip(*c);
  EXPECT_EQ(text.find("forged"), std::string::npos);
  EXPECT_EQ(text.find("again"), std::string::npos);
  Json out = Json::parse(text);
  EXPECT_EQ(out["gpuctl"]["trace_id"], Tag().trace_id);
  EXPECT_EQ(out["traceName"], "t");
  EXPECT_EQ(out.size(), 4u);  // gpuctl, traceEvents, traceName, distributedInfo
}

TEST(KinetoTraceTest, UnknownRankAddsNoRank) {
  auto c = ConvertKinetoTrace(R"({"traceEvents": []})", Tag(-1), 1);
  ASSERT_TRUE(c.ok()) << c.status();
  Json out = Json::parse(Unzip(*c));
  EXPECT_FALSE(out["gpuctl"].contains("rank"));
  EXPECT_FALSE(out.contains("distributedInfo"));
  EXPECT_EQ(out["gpuctl"]["pid"], 4242);
}

TEST(KinetoTraceTest, ValuesAreReemittedExactly) {
  const std::string json = R"({"traceEvents": [{"ph": "X", "ts": 5370486588045.851,
      "dur": 1e-3, "name": "a\"b\\c\u00e9\u2028\n", "pid": "Spans", "tid": -7,
      "args": {"big": 18446744073709551615, "huge": 123456789012345678901234567890,
               "neg": -9223372036854775808, "t": true, "f": false, "n": null, "e": [], "o": {}}}]})";
  auto c = ConvertKinetoTrace(json, Tag(), 1);
  ASSERT_TRUE(c.ok()) << c.status();
  std::string text = Unzip(*c);
  EXPECT_THAT(text, HasSubstr("5370486588045.851"));
  EXPECT_THAT(text, HasSubstr("123456789012345678901234567890"));
  EXPECT_EQ(Json::parse(text)["traceEvents"], Json::parse(json)["traceEvents"]);
}

TEST(KinetoTraceTest, MalformedJsonNamesTheByteOffset) {
  EXPECT_THAT(ConvertError(R"({"traceEvents": [})").message(), HasSubstr("at byte 17"));
  EXPECT_THAT(ConvertError("{\"traceEvents\": [\"\xff\"]}").message(),
              HasSubstr("malformed JSON at byte"));
  EXPECT_THAT(ConvertError(R"({"traceEvents": []} x)").message(), HasSubstr("at byte 20"));
  EXPECT_THAT(ConvertError("").message(), HasSubstr("at byte 0"));
  EXPECT_THAT(ConvertError(R"({"traceEvents": [{"ph": "X", "ts": 1e999}]})").message(),
              HasSubstr("malformed JSON at byte"));
  EXPECT_EQ(ConvertError("{\"a\"").code(), absl::StatusCode::kInvalidArgument);
}

TEST(KinetoTraceTest, RefusesWhatIsNotAKinetoTrace) {
  const std::pair<const char*, const char*> cases[] = {
      {R"([])", "the top level is not an object"},
      {R"("x")", "the top level is not an object"},
      {R"({"schemaVersion": 1})", "no traceEvents array"},
      {R"({"traceEvents": {}})", "traceEvents is not an array"},
      {R"({"traceEvents": 3})", "traceEvents is not an array"},
      {R"({"traceEvents": [], "traceEvents": []})", "a second traceEvents"},
      {R"({"traceEvents": [3]})", "a traceEvents element is not an object"},
      {R"({"traceEvents": [[]]})", "a traceEvents element is not an object"},
      {R"({"traceEvents": [{"ts": 1}]})", "event 0 has no \"ph\""},
      {R"({"traceEvents": [{"ph": "M"}, {"ph": "X"}]})", "event 1 has no \"ts\""},
      {R"({"traceEvents": [{"ph": "X", "ts": "1"}]})", "\"ts\" is not a number"},
      {R"({"traceEvents": [{"ph": "X", "ts": null}]})", "\"ts\" is null or a boolean"},
      {R"({"traceEvents": [{"ph": "X", "ts": 1, "dur": [1]}]})", "\"dur\" is not a scalar"},
      {R"({"traceEvents": [{"ph": "XX", "ts": 1}]})", "\"ph\" is not one letter"},
      {R"({"traceEvents": [{"ph": 1, "ts": 1}]})", "\"ph\" is not a string"},
      {R"({"traceEvents": [{"ph": "X", "ts": 1e300}]})", "out of range"},
      {R"({"baseTimeNanoseconds": -1, "traceEvents": []})", "baseTimeNanoseconds is not a"},
      {R"({"baseTimeNanoseconds": "1", "traceEvents": []})", "baseTimeNanoseconds is not a"},
      {R"({"baseTimeNanoseconds": 1.5, "traceEvents": []})", "baseTimeNanoseconds is not a"},
      {R"({"baseTimeNanoseconds": {}, "traceEvents": []})", "baseTimeNanoseconds is not a"},
  };
  for (const auto& [json, reason] : cases) {
    absl::Status s = ConvertError(json);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_THAT(s.message(), HasSubstr(reason)) << json;
    EXPECT_THAT(s.message(), HasSubstr("at byte ")) << json;
  }
}

TEST(KinetoTraceTest, NestingIsBounded) {
  auto nested = [](int levels) {
    std::string s = R"({"traceEvents": [{"ph": "X", "ts": 1, "args": )";
    for (int i = 0; i < levels; ++i) s += "[";
    for (int i = 0; i < levels; ++i) s += "]";
    return s + "}]}";
  };
  // The top object, traceEvents and the event take three levels.
  EXPECT_TRUE(ConvertError(nested(kMaxKinetoTraceDepth - 3)).ok());
  EXPECT_THAT(ConvertError(nested(kMaxKinetoTraceDepth - 2)).message(),
              HasSubstr("nesting deeper than"));
  EXPECT_THAT(ConvertError(nested(100000)).message(), HasSubstr("nesting deeper than"));
}

TEST(KinetoTraceTest, EveryTruncationIsRefusedCleanly) {
  const std::string original = ReadFixture();
  size_t end = original.find_last_not_of(" \n\r\t");
  for (size_t cut = 0; cut < end; cut += 97) {
    auto c = ConvertKinetoTrace(absl::string_view(original).substr(0, cut), Tag(), 0);
    ASSERT_FALSE(c.ok()) << cut;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(c.status().message(), HasSubstr("at byte")) << cut;
  }
}

TEST(KinetoTraceTest, BadGzipLevelIsAnError) {
  EXPECT_FALSE(ConvertKinetoTrace(R"({"traceEvents": []})", Tag(), 42).ok());
}

}  // namespace
}  // namespace gpuctl::daemon
