// The merge's reading of its inputs: the event stream, exact times, and
// malformed files, which fail with a message and never write.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/analysis/testing/trace_builder.h"
#include "daemon/analysis/trace_input.h"
#include "daemon/merge/event_stream.h"
#include "daemon/merge/merge.h"
#include "nlohmann/json.hpp"

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

TEST(EventStreamTest, NamesWhatIsWrongWithADocumentAndItsByte) {
  const std::string deep_event = absl::StrCat(R"({"traceEvents":[{"a":)", std::string(70, '['));
  const std::string deep_member = absl::StrCat(R"({"m":)", std::string(70, '['));
  const std::pair<std::string, std::string> cases[] = {
      {R"({"traceEvents":[{"ph":"X",,]})", "t.json: malformed JSON at byte 26: "},
      {R"([{"ph":"X"}])", "t.json: not a trace: the top level is not an object at byte 0"},
      {R"({"traceEvents":{}})", "t.json: not a trace: traceEvents is not an array at byte 15"},
      {R"({"traceEvents":[1]})", "t.json: not a trace: a traceEvents element is not an object"},
      {R"({"other":[]})", "t.json: not a trace: no traceEvents array before the object's end"},
      {R"({"traceEvents":[],"traceEvents":[]})",
       "t.json: not a trace: a second traceEvents at byte 32"},
      {R"({"traceEvents":[{"ts":1},)", "t.json: malformed JSON at byte 25: the file ends inside"},
      // The event is level 1: the 64th bracket inside it is level 65.
      {absl::StrCat(deep_event, std::string(70, ']'), "}]}"),
       absl::StrCat("t.json: not a trace: nesting deeper than 64 levels at byte ", 21 + 63)},
      {absl::StrCat(deep_member, std::string(70, ']'), R"(,"traceEvents":[]})"),
       absl::StrCat("t.json: not a trace: nesting deeper than 64 levels at byte ", 5 + 64)},
  };
  for (const auto& [json, message] : cases) {
    for (size_t piece : {size_t{1}, size_t{5}, size_t{1} << 20}) {
      absl::StatusOr<StreamedHeader> header = StreamTraceInPieces(
          analysis::TraceInput::FromBytes(json), "t.json",
          [](const StreamedEvent& /*e*/) { return absl::OkStatus(); }, piece);
      ASSERT_FALSE(header.ok()) << json;
      EXPECT_EQ(header.status().code(), absl::StatusCode::kInvalidArgument) << json;
      EXPECT_THAT(std::string(header.status().message()), HasSubstr(message))
          << json << " in pieces of " << piece;
    }
  }
}

TEST(EventStreamTest, BuildsNumbersAsNlohmannDoes) {
  std::vector<StreamedEvent> events;
  absl::StatusOr<StreamedHeader> header =
      Stream(R"({"traceEvents":[{"ts":-0,"dur":1E2,"a":99999999999999999999999,)"
             R"("b":-9223372036854775808,"c":18446744073709551615,"d":-1.25e-1,"e":7}]})",
             &events);
  ASSERT_TRUE(header.ok()) << header.status();
  ASSERT_EQ(events.size(), 1u);
  const Json& e = events[0].value;
  EXPECT_EQ(events[0].ts_text, "-0");
  EXPECT_EQ(events[0].dur_text, "1E2");
  EXPECT_TRUE(e["dur"].is_number_float());
  EXPECT_EQ(e["dur"], 100.0);
  EXPECT_TRUE(e["a"].is_number_float());
  EXPECT_EQ(e["a"], 1e23);
  EXPECT_TRUE(e["b"].is_number_integer() && !e["b"].is_number_unsigned());
  EXPECT_EQ(e["b"], INT64_MIN);
  EXPECT_TRUE(e["c"].is_number_unsigned());
  EXPECT_EQ(e["c"], UINT64_MAX);
  EXPECT_EQ(e["d"], -0.125);
  EXPECT_TRUE(e["e"].is_number_unsigned());
  EXPECT_EQ(e["e"], 7);
  EXPECT_TRUE(e["ts"].is_number_integer() && !e["ts"].is_number_unsigned());
  for (const char* bad : {R"({"traceEvents":[{"a":01}]})", R"({"traceEvents":[{"a":1.}]})",
                          R"({"traceEvents":[{"a":-}]})", R"({"traceEvents":[{"a":nul}]})",
                          R"({"traceEvents":[{"a":1e400}]})"}) {
    header = Stream(bad, &events);
    ASSERT_FALSE(header.ok()) << bad;
    EXPECT_THAT(std::string(header.status().message()), HasSubstr("t.json: malformed JSON at byte"))
        << bad;
  }
}

TEST(EventStreamTest, SixtyFourLevelsAreRead) {
  std::vector<StreamedEvent> events;
  absl::StatusOr<StreamedHeader> header = Stream(
      absl::StrCat(R"({"m":)", std::string(64, '['), std::string(64, ']'),
                   R"(,"traceEvents":[{"a":)", std::string(63, '['), std::string(63, ']'), "}]}"),
      &events);
  ASSERT_TRUE(header.ok()) << header.status();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(header->members["m"].dump(), absl::StrCat(std::string(64, '['), std::string(64, ']')));
}

// The caller's own error comes back as it is, and no event after it is read.
TEST(EventStreamTest, AVisitErrorStopsTheStreamAsItIs) {
  const std::string json = R"({"traceEvents":[{"n":1},)"
                           "\n"
                           R"({"n":2},)"
                           "\n"
                           R"({"n":3}],"gpuctl":{}})";
  for (size_t piece : {size_t{1}, size_t{3}, size_t{1} << 20}) {
    std::vector<int> seen;
    absl::StatusOr<StreamedHeader> header = StreamTraceInPieces(
        analysis::TraceInput::FromBytes(json), "t.json",
        [&seen](const StreamedEvent& e) {
          seen.push_back(e.value["n"].get<int>());
          return seen.size() == 2 ? absl::ResourceExhaustedError("too many rows")
                                  : absl::OkStatus();
        },
        piece);
    ASSERT_FALSE(header.ok()) << piece;
    EXPECT_EQ(header.status(), absl::ResourceExhaustedError("too many rows")) << piece;
    EXPECT_EQ(seen, (std::vector<int>{1, 2})) << piece;
  }
}

std::string Describe(const absl::StatusOr<StreamedHeader>& header,
                     const std::vector<StreamedEvent>& events) {
  if (!header.ok()) return std::string(header.status().message());
  std::string out = absl::StrCat("events ", header->events, " bytes ", header->decompressed_bytes,
                                 " members ", header->members.dump(), "\n");
  for (const StreamedEvent& e : events) {
    absl::StrAppend(&out, e.value.dump(), " ts=", e.ts_text, " dur=", e.dur_text, "\n");
  }
  return out;
}

// A value's text with each number's type: what the sinks write by.
std::string Typed(const Json& j) {
  if (j.is_number_unsigned()) return absl::StrCat("u", j.dump());
  if (j.is_number_integer()) return absl::StrCat("i", j.dump());
  if (j.is_number_float()) return absl::StrCat("f", j.dump());
  if (!j.is_structured()) return j.dump();
  std::string out = j.is_object() ? "{" : "[";
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (j.is_object()) absl::StrAppend(&out, it.key(), ":");
    absl::StrAppend(&out, Typed(it.value()), ",");
  }
  return out + (j.is_object() ? "}" : "]");
}

// Tiny pieces cut the document everywhere (inside events, keys, strings,
// numbers and top-level members): the same events, each handed over once,
// the same times as written, the same header.
TEST(EventStreamTest, TinyPiecesGiveTheSameEventsOnceEach) {
  std::string events;
  for (int i = 0; i < 40; ++i) {
    absl::StrAppend(&events, i == 0 ? "" : ",\n",
                    absl::StrFormat(R"({"ph":"X","name":"k\u00e9\"%d","ts":17000000%d.%03d,)"
                                    R"("dur":%d,"pid":%d,"tid":-7,"args":{"z":[1,2.50,{"q":null}],)"
                                    R"("a":true,"big":18446744073709551615,"e":1.5e3}})",
                                    i, i, i * 7, i + 1, i % 3));
  }
  const std::string json = absl::StrCat(
      R"({"schemaVersion":1,"deviceProperties":[{"id":0,"name":"H100"}],"traceEvents":[)", events,
      "],\n", R"("gpuctl":{"host":"n\tx","rank":3},"baseTimeNanoseconds":12})");
  std::vector<StreamedEvent> whole;
  const std::string expected = Describe(Stream(json, &whole), whole);
  ASSERT_EQ(whole.size(), 40u) << expected;
  EXPECT_EQ(whole[3].ts_text,
            "17000000"
            "3.021");
  EXPECT_EQ(whole[3].dur_text, "4");
  EXPECT_EQ(whole[3].value["name"], "k\xc3\xa9\"3");
  EXPECT_EQ(whole[3].value["args"]["big"], uint64_t{18446744073709551615u});
  EXPECT_THAT(expected, HasSubstr(absl::StrCat(" bytes ", json.size(), " ")));
  EXPECT_THAT(whole[0].value.dump(), HasSubstr(R"({"ph":"X","name":)"));  // order kept
  // Each event and member as nlohmann's own parser builds it, numbers' types
  // included.
  const Json parsed = Json::parse(json);
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(Typed(whole[i].value), Typed(parsed["traceEvents"][i])) << i;
  }
  Json members = parsed;
  members.erase("traceEvents");
  std::vector<StreamedEvent> again;
  EXPECT_EQ(Typed(Stream(json, &again).value().members), Typed(members));
  const std::string pretty = parsed.dump(2);
  std::vector<StreamedEvent> pretty_events;
  const std::string pretty_expected = Describe(Stream(pretty, &pretty_events), pretty_events);
  ASSERT_EQ(pretty_events.size(), 40u) << pretty_expected;
  EXPECT_EQ(pretty_events[3].ts_text,
            "17000000"
            "3.021");  // no line break or indent
  EXPECT_EQ(pretty_events[3].value, whole[3].value);
  for (const std::string* layout : {&json, &pretty}) {
    for (size_t piece : {size_t{1}, size_t{2}, size_t{7}, size_t{64}, size_t{333}}) {
      std::vector<StreamedEvent> got;
      absl::StatusOr<StreamedHeader> header = StreamTraceInPieces(
          analysis::TraceInput::FromBytes(*layout), "t.json",
          [&got](const StreamedEvent& e) {
            got.push_back(e);
            return absl::OkStatus();
          },
          piece);
      EXPECT_EQ(Describe(header, got), layout == &json ? expected : pretty_expected) << piece;
    }
  }
}

TEST(EventStreamTest, DecompressedBytesAreTheDocumentsSize) {
  const std::string json = absl::StrCat(R"({"traceEvents":[{"ph":"i","ts":1}],"x":")",
                                        std::string(300000, 'x'), R"("})", "\n\n");
  for (const std::string& bytes : {json, analysis::testing::GzipMembers(json, 3)}) {
    std::vector<StreamedEvent> events;
    absl::StatusOr<StreamedHeader> header = Stream(bytes, &events);
    ASSERT_TRUE(header.ok()) << header.status();
    EXPECT_EQ(header->decompressed_bytes, json.size());
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
      R"({"ph":"O","id2":{"local":2},"cat":"o","name":"o","pid":1,"tid":1,"ts":2,)"
      R"("args":{"snapshot":{"a":[1]}}},)"
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
