// The trace reader's streaming over pieces of the document: the same model
// whatever the document's line layout, elements and top-level members larger
// than a piece, escapes, and errors that name their byte.
#include "daemon/analysis/trace_json_stream.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/analysis/testing/trace_builder.h"
#include "daemon/analysis/trace_input.h"
#include "daemon/analysis/trace_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::analysis {
namespace {

using testing::GzipMembers;
using ::testing::HasSubstr;
using testing::TraceBuilder;

// Several MiB of JSON: several of the reader's 1 MiB pieces.
std::string LargeTrace(int steps = 2500) {
  TraceBuilder b;
  b.Gpuctl({.rank = 1, .window_start_ns = 0, .window_end_ns = int64_t{steps + 1} * 1'000'000});
  uint64_t corr = 1;
  for (int s = 0; s < steps; ++s) {
    const int64_t t0 = int64_t{s} * 1'000'000;
    b.Step(s, t0, 900'000);
    b.Range("forward", t0 + 1'000, 50'000);
    for (int k = 0; k < 6; ++k) {
      b.Runtime("cudaLaunchKernel", t0 + 2'000 + int64_t{k} * 20'000, 4'000, corr);
      b.Kernel(absl::StrCat("kernel_", k), t0 + 10'000 + int64_t{k} * 20'000, 6'000 + s % 7,
               corr++);
    }
    b.Memcpy("Memcpy HtoD (Pinned -> Device)", t0 + 200'000, 30'000, corr++, 1 << 20);
    b.Sync("Stream Sync", t0 + 300'000, 40'000, corr++);
  }
  return b.Json();
}

// Everything the model holds that a layout could change.
std::string Fingerprint(const TraceModel& m) {
  std::string out = absl::StrFormat(
      "events %d skipped %d devices %d rank %d window %d:%d..%d fmt %d activities %d\n",
      m.info.events, m.info.skipped_events, m.info.device_count, m.info.rank, m.info.has_window,
      m.info.window_start_ns, m.info.window_end_ns, static_cast<int>(m.info.format),
      m.info.activities.size());
  for (const GpuOp& op : m.gpu_ops) {
    absl::StrAppendFormat(&out, "op %d %d %s %d %d %d %d %d\n", op.start_ns, op.end_ns,
                          m.Name(op.name), op.device, op.stream, static_cast<int>(op.kind),
                          op.bytes, op.correlation);
  }
  for (const ApiCall& c : m.api_calls) {
    absl::StrAppendFormat(&out, "api %d %d %s %d\n", c.start_ns, c.end_ns, m.Name(c.name),
                          c.correlation);
  }
  for (const SyncRecord& s : m.syncs)
    absl::StrAppendFormat(&out, "sync %d %d\n", s.start_ns, s.end_ns);
  for (const Step& s : m.steps) absl::StrAppendFormat(&out, "step %d %d\n", s.number, s.start_ns);
  for (const HostRange& r : m.ranges) {
    absl::StrAppendFormat(&out, "range %d %s\n", r.start_ns, m.Name(r.name));
  }
  return out;
}

std::string ReadFingerprint(const std::string& bytes) {
  absl::StatusOr<TraceModel> m = ReadTraceBytes(bytes, "t.json");
  if (!m.ok()) return std::string(m.status().message());
  return Fingerprint(*m);
}

TEST(TraceJsonStreamTest, EveryLineLayoutGivesTheSameModel) {
  const std::string json = LargeTrace();
  ASSERT_GT(json.size(), size_t{4} << 20);
  const std::string expected = ReadFingerprint(json);
  ASSERT_THAT(expected, HasSubstr("op ")) << expected.substr(0, 300);
  const nlohmann::json doc = nlohmann::json::parse(json);
  // No line break at all: pieces are cut after commas outside strings.
  EXPECT_EQ(ReadFingerprint(doc.dump()), expected);
  // Pretty-printed, an event over many lines (as kineto writes them).
  EXPECT_EQ(ReadFingerprint(doc.dump(2)), expected);
  // CRLF line ends.
  std::string crlf;
  for (char c : doc.dump(1)) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  EXPECT_EQ(ReadFingerprint(crlf), expected);
  // gzip in several members.
  EXPECT_EQ(ReadFingerprint(GzipMembers(json, 5)), expected);
}

TEST(TraceJsonStreamTest, TinyPiecesCutEverywhereAndGiveTheSameModel) {
  const std::string json = LargeTrace(40);
  const std::string expected = ReadFingerprint(json);
  const nlohmann::json doc = nlohmann::json::parse(json);
  for (const std::string& layout : {json, doc.dump(), doc.dump(2)}) {
    for (size_t piece : {1u, 7u, 64u, 333u, 4096u}) {
      absl::StatusOr<TraceModel> m =
          ReadTraceInPieces(TraceInput::FromBytes(layout), "t.json", piece);
      ASSERT_TRUE(m.ok()) << piece << ": " << m.status();
      EXPECT_EQ(Fingerprint(*m), expected) << piece;
    }
  }
  // Errors name the same byte however the document is cut.
  std::string bad = doc.dump(1);
  const size_t colon = bad.find(':', bad.size() / 2);
  bad[colon] = ';';
  for (size_t piece : {size_t{1}, size_t{7}, size_t{64}, size_t{4096}, size_t{1} << 20}) {
    absl::StatusOr<TraceModel> m = ReadTraceInPieces(TraceInput::FromBytes(bad), "t.json", piece);
    ASSERT_FALSE(m.ok()) << piece;
    EXPECT_THAT(std::string(m.status().message()),
                HasSubstr(absl::StrCat("malformed JSON at byte ", colon, ": ")))
        << piece;
  }
}

TEST(TraceJsonStreamTest, TopLevelMembersAfterTraceEventsAreRead) {
  const std::string json = LargeTrace(300);
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(json);
  nlohmann::ordered_json moved;
  moved["traceEvents"] = doc["traceEvents"];
  for (auto& [key, value] : doc.items()) {
    if (key != "traceEvents") moved[key] = value;
  }
  EXPECT_EQ(ReadFingerprint(moved.dump(1)), ReadFingerprint(json));
}

TEST(TraceJsonStreamTest, AnElementLargerThanAPieceIsReadWhole) {
  TraceBuilder b;
  b.Kernel("before", 1'000, 10, 1);
  b.Raw(absl::StrCat(R"({"ph": "X", "cat": "kernel", "name": "huge", "pid": 0, "tid": 7, )",
                     R"("ts": 2.5, "dur": 3, "args": {"note": ")", std::string(3 << 20, 'x'),
                     R"(", "stream": 7, "device": 0, "correlation": 2}})"));
  b.Kernel("after", 5'000, 10, 3);
  const std::string json = b.Json();
  for (const std::string& layout : {json, nlohmann::json::parse(json).dump()}) {
    absl::StatusOr<TraceModel> m = ReadTraceBytes(layout, "t.json");
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_EQ(m->gpu_ops.size(), 3u);  // sorted by start: before, huge, after
    EXPECT_EQ(m->Name(m->gpu_ops[0].name), "before");
    EXPECT_EQ(m->Name(m->gpu_ops[1].name), "huge");
    EXPECT_EQ(m->gpu_ops[1].correlation, 2u);
    EXPECT_EQ(m->Name(m->gpu_ops[2].name), "after");
  }
}

TEST(TraceJsonStreamTest, TopLevelMembersLargerThanAPieceAreCountedOnce) {
  // deviceProperties before traceEvents spans pieces: the tries that end
  // early are undone, so each device counts once.
  std::string devices;
  for (int d = 0; d < 20000; ++d) {
    absl::StrAppend(&devices, d == 0 ? "" : ",\n", R"({"id": )", d,
                    R"(, "totalGlobalMem": 85000000000, "name": "NVIDIA H100 80GB HBM3"})");
  }
  const std::string json = absl::StrCat(R"({"deviceProperties": [)", devices, "],\n",
                                        R"("traceEvents": [{"ph": "X", "cat": "kernel", )",
                                        R"("name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2}]})");
  ASSERT_GT(json.size(), size_t{1} << 20);
  absl::StatusOr<TraceModel> m = ReadTraceBytes(json, "t.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->info.device_count, 20000);
  EXPECT_EQ(m->device_memory.size(), 20000u);
  EXPECT_EQ(m->gpu_ops.size(), 1u);
}

TEST(TraceJsonStreamTest, EscapesInKeysAndStrings) {
  const std::string json =
      R"({"traceEvents": [{"ph": "X", "c\u0061t": "kernel", "name": "k\"q\u00e9\\n", )"
      R"("pid": 0, "tid": 7, "ts": 1.5, "dur": 2, "args": {"str\u0065am": 9}}]})";
  absl::StatusOr<TraceModel> m = ReadTraceBytes(json, "t.json");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->gpu_ops.size(), 1u);
  EXPECT_EQ(m->Name(m->gpu_ops[0].name), "k\"q\xc3\xa9\\n");
  EXPECT_EQ(m->gpu_ops[0].stream, 9);
  EXPECT_EQ(m->gpu_ops[0].start_ns, 1'500);
}

TEST(TraceJsonStreamTest, MalformedJsonInALaterPieceNamesItsByte) {
  std::string json = LargeTrace(1500);
  const size_t at = json.find(R"("name": "kernel_3")", json.size() * 3 / 4);
  ASSERT_NE(at, std::string::npos);
  const size_t colon = at + 6;
  ASSERT_EQ(json[colon], ':');
  json[colon] = ';';
  for (const std::string& bytes : {json, GzipMembers(json, 3)}) {
    absl::StatusOr<TraceModel> m = ReadTraceBytes(bytes, "t.json");
    ASSERT_FALSE(m.ok());
    EXPECT_THAT(std::string(m.status().message()),
                HasSubstr(absl::StrCat("t.json: malformed JSON at byte ", colon, ": ")));
  }
}

TEST(TraceJsonStreamTest, StructuralErrorsAreNamed) {
  struct Case {
    const char* json;
    const char* error;
  } cases[] = {
      {R"({"traceEvents": [{"ph": "X"},]})", "a comma before the end of traceEvents"},
      {R"({"traceEvents": [{"ph": "X"} {"ph": "X"}]})", "malformed JSON at byte 29"},
      {R"({"traceEvents": []} {})", "content after the top-level object at byte 20"},
      {R"({"traceEvents": [], "x": 1} x)", "content after the top-level object"},
      {R"({"traceEvents": [{"ph": "X"}], "traceEvents": []})", "a second traceEvents"},
      {R"({"traceEvents": [{"ph": "X"}, "x"]})", "a traceEvents element is not an object"},
      {R"({"traceEvents": [{"ph": "X"}])", "the file ends before the top-level object closes"},
      {R"({"traceEvents": [{"ph": "X"})", "the file ends inside traceEvents"},
      {R"({"traceEvents": [{"ph": "X", "args": {)", "the file ends inside traceEvents"},
      {R"({"a": [1, 2)", "the file ends inside the top-level object"},
      {"\xEF\xBB\xBF{\"traceEvents\": []}", ""},  // a byte order mark is allowed
      {"{\"traceEvents\": [{\"name\": \"\xff\"}]}", "malformed JSON"},  // not UTF-8
      {R"({"traceEvents": [{"ph": -}]})", "malformed JSON at byte 24"},
      {R"({"traceEvents": [{"ph": nul}]})", "malformed JSON at byte 24"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<TraceModel> m = ReadTraceBytes(c.json, "x.json");
    if (c.error[0] == '\0') {
      EXPECT_TRUE(m.ok()) << c.json << ": " << m.status();
      continue;
    }
    ASSERT_FALSE(m.ok()) << c.json;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(c.error)) << c.json;
  }
}

// Records where each event and top-level member starts; stops the stream
// with its own status at the event or member named `stop_at`.
class RecordingVisitor : public TraceJsonVisitor {
 public:
  explicit RecordingVisitor(std::string stop_at) : stop_at_(std::move(stop_at)) {}

  simdjson::error_code OnTopMember(std::string_view key, simdjson::ondemand::value value) override {
    const uint64_t at = OffsetOf(value.raw_json_token().data());
    if (key == stop_at_) return Stop(key);
    top_.push_back(absl::StrCat(AsAbsl(key), "@", at));
    return simdjson::SUCCESS;
  }
  simdjson::error_code OnEvent(simdjson::ondemand::object event) override {
    std::string line;
    for (auto member : event) {
      simdjson::ondemand::field field;
      if (simdjson::error_code e = std::move(member).get(field); e != simdjson::SUCCESS) return e;
      std::string_view key;
      if (simdjson::error_code e = KeyOf(field, &key); e != simdjson::SUCCESS) return e;
      std::string_view name;
      if (simdjson::error_code e = field.value().get_string().get(name); e != simdjson::SUCCESS) {
        return e;
      }
      // The key's opening quote.
      absl::StrAppend(&line, AsAbsl(name), "@", OffsetOf(field.key().raw()) - 1);
      if (name == stop_at_) return Stop(name);
    }
    events_.push_back(line);
    return simdjson::SUCCESS;
  }
  void SaveTop() override { saved_ = top_.size(); }
  void RestoreTop() override { top_.resize(saved_); }
  absl::Status Stopped() const override { return stopped_; }

  std::vector<std::string> events_, top_;

 private:
  simdjson::error_code Stop(std::string_view what) {
    stopped_ = absl::CancelledError(absl::StrCat("stopped at ", AsAbsl(what)));
    return simdjson::UNEXPECTED_ERROR;
  }
  std::string stop_at_;
  size_t saved_ = 0;
  absl::Status stopped_;
};

TEST(TraceJsonStreamTest, AVisitorThatStopsGetsItsOwnStatusBack) {
  const std::string json =
      "{\"a\": [1, 2],\n\"traceEvents\": [{\"n\": \"e1\"},\n{\"n\": \"e2\"}, {\"n\": "
      "\"e3\"}],\n\"b\": {\"c\": 3}}";
  for (size_t piece : {size_t{1}, size_t{4}, size_t{1} << 20}) {
    RecordingVisitor all("");
    TraceInput input = TraceInput::FromBytes(json);
    ASSERT_TRUE(StreamTraceJson(&input, &all, piece).ok()) << piece;
    // OffsetOf names each value's byte in the document, whatever the cut.
    EXPECT_EQ(all.top_, (std::vector<std::string>{absl::StrCat("a@", json.find('[')),
                                                  absl::StrCat("b@", json.rfind('{'))}))
        << piece;
    EXPECT_EQ(all.events_,
              (std::vector<std::string>{absl::StrCat("e1@", json.find("\"n\"")),
                                        absl::StrCat("e2@", json.find("\"n\": \"e2")),
                                        absl::StrCat("e3@", json.find("\"n\": \"e3"))}))
        << piece;
    for (const char* stop_at : {"e2", "b", "a"}) {
      RecordingVisitor stopping(stop_at);
      TraceInput again = TraceInput::FromBytes(json);
      EXPECT_EQ(StreamTraceJson(&again, &stopping, piece),
                absl::CancelledError(absl::StrCat("stopped at ", stop_at)))
          << piece;
      const size_t events_before = std::string(stop_at) == "a"    ? 0
                                   : std::string(stop_at) == "e2" ? 1
                                                                  : 3;
      EXPECT_EQ(stopping.events_.size(), events_before) << stop_at;
    }
  }
  // A visitor's error without a status of its own is the stream's to name.
  RecordingVisitor strict("");
  TraceInput input = TraceInput::FromBytes(R"({"traceEvents": [{"n": 5}]})");
  absl::Status status = StreamTraceJson(&input, &strict);
  EXPECT_THAT(std::string(status.message()), HasSubstr("malformed JSON at byte"));
}

}  // namespace
}  // namespace gpuctl::analysis
