#include "daemon/convert/chrome_trace.h"

#include <regex>
#include <string>
#include <vector>

#include "daemon/convert/testing/payload_builder.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::daemon {
namespace {

using ::gpuctl::testing::PayloadBuilder;
using nlohmann::json;

constexpr int32_t kPid = 4242;
// 2024-01-01T00:00:00.250Z: the base rounds down to the whole second.
constexpr int64_t kStart = 1704067200'250'000'000;
constexpr int64_t kBase = 1704067200'000'000'000;
constexpr int64_t kEnd = kStart + 1'000'000'000;

struct Converted {
  std::string text;
  json doc;
};

Converted Convert(const std::vector<uint8_t>& payload, int32_t rank = 3, int32_t world = 8,
                  int32_t analysis_rank = -1) {
  RecordReaderOptions options;
  options.expected_pid = kPid;
  auto records = ReadRecords(payload, options);
  EXPECT_TRUE(records.ok()) << records.status();
  ChromeTraceMeta meta;
  meta.trace_id = "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b";
  meta.host = "h1";
  meta.file_name = "h1-rank3-pid4242.json.gz";
  meta.process.set_pid(kPid);
  meta.process.set_rank(rank);
  meta.process.set_world_size(world);
  meta.analysis_rank = analysis_rank;
  meta.process.set_job_id("job\"42");
  meta.process.set_library_version("0.1.0");
  meta.process.add_cmdline("/usr/bin/python3");
  meta.process.add_cmdline("train.py");
  StringSink sink;
  EXPECT_TRUE(WriteChromeTrace(*records, meta, &sink).ok());
  Converted c{sink.str(), json::parse(sink.str())};
  return c;
}

std::vector<json> Events(const json& doc, absl::string_view ph, absl::string_view name = "") {
  std::vector<json> out;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == std::string(ph) &&
        (name.empty() || e["name"].get<std::string>() == std::string(name))) {
      out.push_back(e);
    }
  }
  return out;
}

TEST(ChromeTraceTest, BaseTimeRoundsDownToSecond) {
  EXPECT_EQ(ChromeTraceBaseNanos(kStart), kBase);
  EXPECT_EQ(ChromeTraceBaseNanos(kBase), kBase);
  EXPECT_EQ(ChromeTraceBaseNanos(-1), -1'000'000'000);
}

TEST(ChromeTraceTest, TopLevelMatchesKineto) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.set_dropped_events(11);
  Converted c = Convert(b.Build());
  const json& d = c.doc;
  EXPECT_EQ(d["schemaVersion"], 1);
  EXPECT_TRUE(d["deviceProperties"].is_array());
  EXPECT_EQ(d["distributedInfo"]["backend"], "");
  EXPECT_EQ(d["distributedInfo"]["rank"], 3);
  EXPECT_EQ(d["distributedInfo"]["world_size"], 8);
  EXPECT_EQ(d["displayTimeUnit"], "ms");
  EXPECT_EQ(d["baseTimeNanoseconds"].get<int64_t>(), kBase);
  EXPECT_EQ(d["traceName"], "h1-rank3-pid4242.json.gz");
  const json& g = d["gpuctl"];
  EXPECT_EQ(g["trace_id"], "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b");
  EXPECT_EQ(g["host"], "h1");
  EXPECT_EQ(g["pid"], kPid);
  EXPECT_EQ(g["job_id"], "job\"42");
  EXPECT_EQ(g["library_version"], "0.1.0");
  EXPECT_EQ(g["dropped_events"], 11);
  // Holistic Trace Analysis reads the rank with this regex.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(c.text, m, std::regex(R"("rank":\s+(\d+))")));
  EXPECT_EQ(m[1], "3");
}

TEST(ChromeTraceTest, UnknownRankStillMatchesHtaRegexWithoutClaimingRankZero) {
  PayloadBuilder b(kPid, kStart, kEnd);
  Converted c = Convert(b.Build(), -1, -1);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(c.text, m, std::regex(R"("rank":\s+(\d+))")));
  // No analysis rank chosen: the pid, never 0 (which rank 0's file holds).
  EXPECT_EQ(m[1], std::to_string(kPid));
  // Unknown in both places: absent for HTA, -1 in gpuctl's own metadata.
  EXPECT_FALSE(c.doc["distributedInfo"].contains("world_size"));
  EXPECT_EQ(c.doc["gpuctl"]["rank"], -1);
  EXPECT_EQ(c.doc["gpuctl"]["world_size"], -1);
}

TEST(ChromeTraceTest, AnUnknownRankIsWrittenAsTheAnalysisRankChosenForIt) {
  PayloadBuilder b(kPid, kStart, kEnd);
  Converted c = Convert(b.Build(), -1, 4, /*analysis_rank=*/4);
  EXPECT_EQ(c.doc["distributedInfo"]["rank"], 4);
  EXPECT_EQ(c.doc["distributedInfo"]["world_size"], 4);
  EXPECT_EQ(c.doc["gpuctl"]["rank"], -1);
}

TEST(ChromeTraceTest, RangesBecomeUserAnnotations) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddThreadName(7, "trainer");
  b.AddRange(7, kStart + 1'234'567, kStart + 2'000'000, "forward", 1, 99);
  b.AddRange(8, kStart, kStart + 5, "back\"slash\\ \x01 \xff", 0, 100);
  Converted c = Convert(b.Build());
  auto fwd = Events(c.doc, "X", "forward");
  ASSERT_EQ(fwd.size(), 1u);
  EXPECT_EQ(fwd[0]["cat"], "user_annotation");
  EXPECT_EQ(fwd[0]["pid"], kPid);
  EXPECT_EQ(fwd[0]["tid"], 7);
  EXPECT_DOUBLE_EQ(fwd[0]["ts"].get<double>(), 251234.567);
  EXPECT_DOUBLE_EQ(fwd[0]["dur"].get<double>(), 765.433);
  EXPECT_EQ(fwd[0]["args"]["External id"], 99);
  EXPECT_EQ(fwd[0]["args"]["depth"], 1);
  // Like kineto's user annotations, no "correlation": consumers join it as a
  // CUDA correlation id, and a range id would match some launch's.
  for (const json& e : Events(c.doc, "X")) {
    if (e["cat"] == "user_annotation") {
      EXPECT_FALSE(e["args"].contains("correlation")) << e;
    }
  }
  EXPECT_NE(c.text.find("\"ts\": 251234.567"), std::string::npos);
  auto odd = Events(c.doc, "X", "back\"slash\\ \x01 \xef\xbf\xbd");
  ASSERT_EQ(odd.size(), 1u);
  EXPECT_DOUBLE_EQ(odd[0]["dur"].get<double>(), 0.005);
  // Metadata like kineto's.
  auto pname = Events(c.doc, "M", "process_name");
  ASSERT_EQ(pname.size(), 1u);
  EXPECT_EQ(pname[0]["args"]["name"], "python3");
  EXPECT_EQ(Events(c.doc, "M", "process_labels")[0]["args"]["labels"], "job job\"42, rank 3");
  EXPECT_EQ(Events(c.doc, "M", "process_sort_index")[0]["args"]["sort_index"], kPid);
  auto threads = Events(c.doc, "M", "thread_name");
  ASSERT_EQ(threads.size(), 2u);
  EXPECT_EQ(threads[0]["tid"], 7);
  EXPECT_EQ(threads[0]["args"]["name"], "trainer");
  EXPECT_EQ(threads[1]["tid"], 8);
  EXPECT_EQ(threads[1]["args"]["name"], "thread 8");
  EXPECT_EQ(Events(c.doc, "M", "thread_sort_index").size(), 2u);
  // The capture window.
  std::vector<json> window;
  for (const json& e : Events(c.doc, "X")) {
    if (e["cat"] == "Trace") window.push_back(e);
  }
  ASSERT_EQ(window.size(), 1u);
  EXPECT_DOUBLE_EQ(window[0]["ts"].get<double>(), 250000.0);
  EXPECT_DOUBLE_EQ(window[0]["dur"].get<double>(), 1000000.0);
}

TEST(ChromeTraceTest, StepsSpanToNextStepOrWindowEnd) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddStep(7, kStart + 300'000, 11);  // out of order on purpose
  b.AddStep(7, kStart + 100'000, 10);
  b.AddStep(9, kStart + 200'000, 10);
  Converted c = Convert(b.Build());
  auto s10 = Events(c.doc, "X", "ProfilerStep#10");
  ASSERT_EQ(s10.size(), 2u);
  for (const json& e : s10) {
    EXPECT_EQ(e["cat"], "user_annotation");
    if (e["tid"] == 7) {
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 200.0);
    } else {
      EXPECT_EQ(e["tid"], 9);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 999800.0);
    }
  }
  auto s11 = Events(c.doc, "X", "ProfilerStep#11");
  ASSERT_EQ(s11.size(), 1u);
  EXPECT_DOUBLE_EQ(s11[0]["ts"].get<double>(), 250300.0);
  EXPECT_DOUBLE_EQ(s11[0]["dur"].get<double>(), 999700.0);
}

TEST(ChromeTraceTest, LargeTraceStreamsInPieces) {
  PayloadBuilder b(kPid, kStart, kEnd);
  uint32_t name = b.AddString("op");
  for (int i = 0; i < 20000; ++i) b.AddRange(1, kStart + i, kStart + i + 1, name, 0, i);
  RecordReaderOptions options;
  options.expected_pid = kPid;
  std::vector<uint8_t> payload = b.Build();
  auto records = ReadRecords(payload, options);
  ASSERT_TRUE(records.ok());
  class CountingSink : public ByteSink {
   public:
    absl::Status Append(absl::string_view data) override {
      ++calls;
      text.append(data.data(), data.size());
      return absl::OkStatus();
    }
    int calls = 0;
    std::string text;
  } sink;
  ChromeTraceMeta meta;
  meta.process.set_pid(kPid);
  ASSERT_TRUE(WriteChromeTrace(*records, meta, &sink).ok());
  EXPECT_GT(sink.calls, 2);
  json doc = json::parse(sink.text);
  EXPECT_EQ(Events(doc, "X", "op").size(), 20000u);
}

TEST(ChromeTraceTest, ExtraEventsFollowTheRecordsOnTheFilesTimeBase) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddRange(kPid, kStart + 1000, kStart + 2000, "forward", 0, 1);
  RecordReaderOptions options;
  options.expected_pid = kPid;
  // The records point into the payload: it outlives them.
  const std::vector<uint8_t> payload = b.Build();
  auto records = ReadRecords(payload, options);
  ASSERT_TRUE(records.ok()) << records.status();
  ChromeTraceMeta meta;
  meta.trace_id = "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b";
  meta.process.set_pid(kPid);
  int calls = 0;
  meta.extra_events = [&](int64_t base, int64_t start, int64_t end, ChromeTraceMeta::AddEvent add) {
    ++calls;
    EXPECT_EQ(base, kBase);
    EXPECT_EQ(start, kStart);
    EXPECT_EQ(end, kEnd);
    add(R"({"ph": "i", "s": "t", "cat": "cpu_sample", "name": "hot", "pid": 4242, "tid": 7, "ts": 1.5})");
    add(R"j({"ph": "X", "cat": "off_cpu", "name": "off_cpu (blocked)", "pid": 4242, "tid": 7, "ts": 2, "dur": 3})j");
  };
  StringSink sink;
  ASSERT_TRUE(WriteChromeTrace(*records, meta, &sink).ok());
  EXPECT_EQ(calls, 1);
  const json doc = json::parse(sink.str());
  const json& events = doc["traceEvents"];
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[events.size() - 2]["cat"], "cpu_sample");
  EXPECT_EQ(events.back()["cat"], "off_cpu");
  EXPECT_EQ(Events(doc, "X", "forward").size(), 1u);
}

}  // namespace
}  // namespace gpuctl::daemon
