// The merge's reading of its inputs: the event stream, exact times, and
// malformed files, which fail with a message and never write.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/analysis/trace_input.h"
#include "daemon/merge/event_stream.h"
#include "daemon/merge/merge.h"

namespace gpuctl::merge {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

absl::StatusOr<StreamedHeader> Stream(const std::string& json, std::vector<StreamedEvent>* out) {
  return StreamTrace(analysis::TraceInput::FromBytes(json), "t.json",
                     [out](const StreamedEvent& e) {
                       out->push_back(e);
                       return absl::OkStatus();
                     });
}

TEST(EventStreamTest, HandsOverEachEventWithItsTimesAsWritten) {
  std::vector<StreamedEvent> events;
  absl::StatusOr<StreamedHeader> header = Stream(
      R"({"a":1,"traceEvents":[{"ph":"X","ts":1700000000123456.789,"dur":2,"args":{"k":[1,{"z":null}]}},)"
      R"({"ph":"i","ts":5}],"gpuctl":{"host":"n"},"baseTimeNanoseconds":12})",
      &events);
  ASSERT_TRUE(header.ok()) << header.status();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(header->events, 2u);
  EXPECT_EQ(events[0].ts_text, "1700000000123456.789");
  EXPECT_EQ(events[0].dur_text, "2");
  EXPECT_EQ(events[0].value["args"]["k"][1]["z"], nullptr);
  EXPECT_EQ(events[1].dur_text, "");
  EXPECT_EQ(header->members["gpuctl"]["host"], "n");
  EXPECT_EQ(header->members["baseTimeNanoseconds"], 12);
  EXPECT_FALSE(header->members.contains("traceEvents"));
}

TEST(EventStreamTest, ConvertsMicrosecondTextToExactNanoseconds) {
  EXPECT_EQ(MicrosTextToNs("1700000000123456.789"), 1'700'000'000'123'456'789);
  EXPECT_EQ(MicrosTextToNs("-1.5"), -1'500);
  EXPECT_EQ(MicrosTextToNs("2.0004"), 2'000);
  EXPECT_EQ(MicrosTextToNs("2.0005"), 2'001);
  EXPECT_EQ(MicrosTextToNs("1.5e3"), 1'500'000);
  EXPECT_EQ(MicrosTextToNs(""), std::nullopt);
  EXPECT_EQ(MicrosTextToNs("9000000000000001"), std::nullopt);
  EXPECT_EQ(MicrosTextToNs("1.2.3"), std::nullopt);
}

TEST(EventStreamTest, NamesWhatIsWrongWithADocument) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"traceEvents":[{"ph":"X",,]})", "t.json: malformed JSON at byte"},
      {R"([{"ph":"X"}])", "not a trace: the document is not an object"},
      {R"({"traceEvents":{}})", "not a trace: traceEvents is not an array"},
      {R"({"traceEvents":[1]})", "a traceEvents element is not an object"},
      {R"({"other":[]})", "no traceEvents array"},
      {R"({"traceEvents":[],"traceEvents":[]})", "a second traceEvents array"},
      {absl::StrCat(R"({"traceEvents":[{"a":)", std::string(70, '['), std::string(70, ']'), "}]}"),
       "nesting deeper than 64 levels"},
  };
  for (const auto& [json, message] : cases) {
    std::vector<StreamedEvent> events;
    absl::StatusOr<StreamedHeader> header = Stream(json, &events);
    ASSERT_FALSE(header.ok()) << json;
    EXPECT_THAT(header.status().message(), HasSubstr(message)) << json;
  }
}

// Valid JSON of the wrong shape is the file's business, not an error: an
// event whose `ph` is not a string is counted and left out.
TEST(MergeRobustnessTest, AnEventWithoutAStringPhaseIsCountedNotWritten) {
  const fs::path dir = fs::path(::testing::TempDir()) /
                       absl::StrCat("merge_ph_", ::testing::UnitTest::GetInstance()->random_seed());
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "r.json") << R"({"traceEvents":[{"ph":5,"ts":1,"pid":1,"tid":1},)"
                                   R"({"ph":"i","ts":2,"pid":1,"tid":1,"name":"x"}]})";
  for (const char* out : {"m.json", "m.pftrace"}) {
    absl::StatusOr<MergeResult> result =
        MergeTraces({(dir / "r.json").string()}, (dir / out).string(), {});
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->ranks[0].unsupported, 1u) << out;
    EXPECT_EQ(result->ranks[0].written, 1u) << out;
  }
  fs::remove_all(dir);
}

// Seeded mutations of a valid rank (cut short, bytes changed, bytes
// inserted): each merges or fails with a message naming the file, and a
// failure leaves no file behind.
TEST(MergeRobustnessTest, MutatedInputsMergeOrFailCleanly) {
  const fs::path dir =
      fs::path(::testing::TempDir()) /
      absl::StrCat("merge_fuzz_", ::testing::UnitTest::GetInstance()->random_seed());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string valid =
      R"({"gpuctl":{"host":"h","pid":1,"rank":0},"traceEvents":[)"
      R"({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1.5,"dur":2,"args":{"s":7}},)"
      R"({"ph":"C","name":"c","pid":1,"tid":1,"ts":3,"args":{"v":1}},)"
      R"({"ph":"s","id":"0x1","cat":"ac2g","name":"f","pid":1,"tid":1,"ts":1},)"
      R"({"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"main"}}],)"
      R"("baseTimeNanoseconds":1000000000})";
  std::mt19937 rng(7);
  const char alphabet[] = "{}[]\",:0123456789.eE-tfnulX";
  int merged = 0, failed = 0;
  for (int i = 0; i < 400; ++i) {
    std::string input = valid;
    switch (i % 3) {
      case 0:
        input.resize(rng() % input.size());
        break;
      case 1:
        input[rng() % input.size()] = alphabet[rng() % (sizeof(alphabet) - 1)];
        break;
      default:
        input.insert(rng() % input.size(), 1, alphabet[rng() % (sizeof(alphabet) - 1)]);
    }
    const fs::path file = dir / "r.json";
    std::ofstream(file, std::ios::binary | std::ios::trunc) << input;
    const fs::path out = dir / (i % 2 == 0 ? "m.json" : "m.pftrace");
    fs::remove(out);
    absl::StatusOr<MergeResult> result = MergeTraces({file.string()}, out.string(), {});
    if (result.ok()) {
      ++merged;
      EXPECT_TRUE(fs::exists(out));
    } else {
      ++failed;
      EXPECT_THAT(result.status().message(), HasSubstr("r.json")) << input;
      EXPECT_FALSE(fs::exists(out)) << input;
    }
  }
  EXPECT_GT(merged, 0);
  EXPECT_GT(failed, 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpuctl::merge
