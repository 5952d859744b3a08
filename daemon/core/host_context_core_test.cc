// Host context (activities cpu / sched) through the core: when recordings
// start and finish, the events in each process's stored file on its time
// base, and the result when host context is unavailable.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/convert/kineto_trace.h"
#include "daemon/core/host_context.h"
#include "daemon/core/testing/core_test_fixture.h"
#include "gmock/gmock.h"

namespace gpuctl::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

// One sample per instant: written when inside the window asked for, with
// its time from the base handed over (as hostctx's writer does).
class InstantEvents final : public HostContextEvents {
 public:
  InstantEvents(int32_t pid, std::vector<int64_t> times) : pid_(pid), times_(std::move(times)) {}
  Written Write(int64_t base_time_ns, int64_t window_start_ns, int64_t window_end_ns,
                absl::FunctionRef<void(absl::string_view)> sink) const override {
    Written written;
    for (int64_t t : times_) {
      if (t < window_start_ns || t > window_end_ns) continue;
      sink(absl::StrCat(R"({"ph":"i","s":"t","cat":"cpu_sample","name":"hot","pid":)", pid_,
                        R"(,"tid":)", pid_, R"(,"ts":)", (t - base_time_ns) / 1000, "}"));
      ++written.samples;
    }
    return written;
  }

 private:
  int32_t pid_;
  std::vector<int64_t> times_;
};

// Records the calls; Finish answers when the test says.
class FakeHostContext final : public HostContextSource {
 public:
  struct Started {
    Key key;
    int32_t pid;
    HostContextWanted wanted;
  };
  void Start(Key key, int32_t pid, HostContextWanted wanted) override {
    started.push_back({key, pid, wanted});
  }
  void Finish(Key key, Done done) override {
    finished.push_back(key);
    pending.push_back(std::move(done));
  }
  void AnswerAll(const HostContextOutput& output) {
    std::vector<Done> answering = std::move(pending);
    pending.clear();
    for (Done& done : answering) std::move(done)(output);
  }

  std::vector<Started> started;
  std::vector<Key> finished;
  std::vector<Done> pending;
};

// A finished kineto trace file, as the bridge hands it over.
class KinetoFileBytes final : public Payload {
 public:
  explicit KinetoFileBytes(std::string bytes) : bytes_(std::move(bytes)) {}
  absl::Span<const uint8_t> bytes() const override {
    return {reinterpret_cast<const uint8_t*>(bytes_.data()), bytes_.size()};  // NOLINT
  }
  const PreparedTrace* prepared() const override { return &info_; }

 private:
  std::string bytes_;
  PreparedTrace info_{.event_count = 2, .source_bytes = 100};
};

class HostContextCoreTest : public DaemonCoreTest {
 protected:
  void SetUp() override {
    DaemonCoreTest::SetUp();
    host_context_ = &fake_;
    options_.start_delay = absl::Seconds(1);
    MakeCore();
  }

  absl::StatusOr<std::string> TraceWith(std::vector<std::string> activities,
                                        v1::HostUnwind unwind = v1::HOST_UNWIND_UNSPECIFIED) {
    v1::TraceRequest req;
    req.mutable_selector()->set_job_id("42");
    req.mutable_duration()->set_seconds(2);
    req.set_host_unwind(unwind);
    for (std::string& a : activities) req.add_activities(std::move(a));
    return core_->StartTrace(req, observer_);
  }

  static HostContextOutput Recorded(std::shared_ptr<const HostContextEvents> events) {
    HostContextOutput output;
    output.summary.set_state(v1::HostContextResult::STATE_RECORDED);
    output.summary.set_switches(40);
    output.summary.set_threads(3);
    output.summary.set_processes(2);
    output.summary.set_dropped_samples(5);
    output.events = std::move(events);
    return output;
  }

  FakeHostContext fake_;
  std::shared_ptr<RecordingObserver> observer_ = std::make_shared<RecordingObserver>();
};

TEST_F(HostContextCoreTest, RecordsDuringTheWindowAndAddsEventsToTheProcessFile) {
  Attach(1, 100, "42", 0);
  auto id = TraceWith({"kernel", "cpu", "sched"});
  ASSERT_TRUE(id.ok()) << id.status();
  // The processes get the GPU names only.
  ASSERT_EQ(StartsTo(1).size(), 1u);
  const v1::ipc::StartCapture start = StartsTo(1)[0];
  EXPECT_THAT(start.activities(), ElementsAre("kernel"));

  // Nothing is recorded before the window (less its lead).
  RunAll();
  EXPECT_THAT(fake_.started, IsEmpty());
  loop_.AdvanceBy(absl::Milliseconds(899));
  RunAll();
  EXPECT_THAT(fake_.started, IsEmpty());
  loop_.AdvanceBy(absl::Milliseconds(1));
  RunAll();
  ASSERT_EQ(fake_.started.size(), 1u);
  EXPECT_EQ(fake_.started[0].pid, 100);
  EXPECT_TRUE(fake_.started[0].wanted.samples);
  EXPECT_TRUE(fake_.started[0].wanted.switches);

  // The process's result ends its recording; the file waits for the
  // symbolized events.
  loop_.AdvanceBy(absl::Seconds(2));
  RunAll();
  EXPECT_THAT(fake_.finished, IsEmpty());
  SendResult(1, *id, Payload(100, start));
  RunAll();
  ASSERT_EQ(fake_.finished.size(), 1u);
  EXPECT_EQ(fake_.finished[0], fake_.started[0].key);
  EXPECT_EQ(observer_->ResultFor(100), nullptr);

  const int64_t s = start.start_time_unix_ns();
  const int64_t e = s + start.duration_ns();
  fake_.AnswerAll(Recorded(
      std::make_shared<InstantEvents>(100, std::vector<int64_t>{s - 5000000, s + 1500000, e + 1})));
  RunAll();
  const v1::ProcessResult* r = observer_->ResultFor(100);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status(), v1::CAPTURE_STATUS_OK) << r->message();
  const v1::HostContextResult& host = r->host_context();
  EXPECT_EQ(host.state(), v1::HostContextResult::STATE_RECORDED);
  EXPECT_EQ(host.samples(), 1u);  // the one inside the process's window
  EXPECT_EQ(host.switches(), 40u);
  EXPECT_EQ(host.threads(), 3u);
  EXPECT_EQ(host.processes(), 2u);
  EXPECT_EQ(host.dropped_samples(), 5u);

  nlohmann::json trace = ReadTraceJson(*id, r->file());
  const int64_t base = trace["baseTimeNanoseconds"].get<int64_t>();
  std::vector<nlohmann::json> samples;
  for (const auto& event : trace["traceEvents"]) {
    if (event.value("cat", "") == "cpu_sample") samples.push_back(event);
  }
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0]["ts"].get<int64_t>(), (s + 1500000 - base) / 1000);
  // The process's own events are still there.
  EXPECT_NE(trace.dump().find("forward"), std::string::npos);

  auto manifest = store_->GetManifest(*id);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->results(0).host_context().state(), v1::HostContextResult::STATE_RECORDED);
  EXPECT_THAT(manifest->activities(), ElementsAre("kernel", "cpu", "sched"));
}

TEST_F(HostContextCoreTest, AKinetoTraceGetsTheEventsOnItsOwnTimeBase) {
  constexpr PeerId kKineto = kKinetoPeerBit | 1;
  Attach(kKineto, 200, "42", 1);
  auto id = TraceWith({"cpu", "sched"});
  ASSERT_TRUE(id.ok()) << id.status();
  loop_.AdvanceBy(absl::Seconds(1));
  RunAll();
  ASSERT_EQ(fake_.started.size(), 1u);
  EXPECT_EQ(fake_.started[0].pid, 200);

  // kineto's layout: ts in microseconds from a base written after the events.
  const int64_t base = 1'700'000'000'000'000'000;
  const int64_t s = StartsTo(kKineto)[0].start_time_unix_ns();
  const std::string kineto = absl::StrCat(
      R"({"schemaVersion": 1, "traceEvents": [)",
      R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 200, "tid": 200, "ts": 10.5, "dur": 3},)",
      R"({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 12, "dur": 2}],)",
      R"("traceName": "t", "baseTimeNanoseconds": )", base, "}");
  absl::StatusOr<KinetoConverted> converted =
      ConvertKinetoTrace(kineto, {*id, "h1", 1, 200, "42"}, 6);
  ASSERT_TRUE(converted.ok()) << converted.status();
  v1::ipc::CaptureResult result;
  result.set_trace_id(*id);
  result.set_status(v1::CAPTURE_STATUS_OK);
  result.set_payload_size(converted->gzip.size());
  result.set_window_start_unix_ns(s);
  result.set_window_end_unix_ns(s + 2'000'000'000);
  core_->OnCaptureResult(kKineto, result, std::make_unique<KinetoFileBytes>(converted->gzip));
  RunAll();
  fake_.AnswerAll(Recorded(std::make_shared<InstantEvents>(
      200, std::vector<int64_t>{s + 250'000'000, s + 3'000'000'000})));
  RunAll();
  const v1::ProcessResult* r = observer_->ResultFor(200);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status(), v1::CAPTURE_STATUS_OK) << r->message();
  EXPECT_EQ(r->host_context().state(), v1::HostContextResult::STATE_RECORDED)
      << r->host_context().reason();
  EXPECT_EQ(r->host_context().samples(), 1u);

  nlohmann::json trace = ReadTraceJson(*id, r->file());
  EXPECT_EQ(trace["baseTimeNanoseconds"].get<int64_t>(), base);
  const auto& events = trace["traceEvents"];
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["name"], "aten::mm");
  EXPECT_EQ(events[1]["name"], "gemm");
  EXPECT_EQ(events[2]["cat"], "cpu_sample");
  EXPECT_EQ(events[2]["ts"].get<int64_t>(), (s + 250'000'000 - base) / 1000);
  EXPECT_EQ(trace["gpuctl"]["pid"], 200);
}

TEST_F(HostContextCoreTest, UnavailableHostContextStillStoresTheTrace) {
  Attach(1, 100, "42", 0);
  auto id = TraceWith({"cpu"});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_THAT(StartsTo(1)[0].activities(), IsEmpty());
  loop_.AdvanceBy(absl::Seconds(1));
  RunAll();
  ASSERT_EQ(fake_.started.size(), 1u);
  EXPECT_TRUE(fake_.started[0].wanted.samples);
  EXPECT_FALSE(fake_.started[0].wanted.switches);
  SendResult(1, *id, Payload(100, StartsTo(1)[0]));
  RunAll();
  fake_.AnswerAll({HostContextUnavailable("perf_event_open on thread 100: Permission denied; "
                                          "sampling another user's process needs CAP_PERFMON"),
                   nullptr});
  RunAll();
  const v1::ProcessResult* r = observer_->ResultFor(100);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status(), v1::CAPTURE_STATUS_OK) << r->message();
  EXPECT_FALSE(r->file().empty());
  EXPECT_EQ(r->host_context().state(), v1::HostContextResult::STATE_UNAVAILABLE);
  EXPECT_THAT(r->host_context().reason(), HasSubstr("CAP_PERFMON"));
  EXPECT_TRUE(observer_->done);
  EXPECT_TRUE(observer_->final_status.ok()) << observer_->final_status;
}

TEST_F(HostContextCoreTest, ResultsAfterTheWindowFindTheOutputReady) {
  Attach(1, 100, "42", 0);
  auto id = TraceWith({"sched"});
  ASSERT_TRUE(id.ok());
  loop_.AdvanceBy(absl::Seconds(1));
  RunAll();
  ASSERT_EQ(fake_.started.size(), 1u);
  // Half a second past the window the recording stops without the result.
  loop_.AdvanceBy(absl::Milliseconds(2099));
  RunAll();
  EXPECT_THAT(fake_.finished, IsEmpty());
  loop_.AdvanceBy(absl::Milliseconds(500));
  RunAll();
  ASSERT_EQ(fake_.finished.size(), 1u);
  fake_.AnswerAll(Recorded(nullptr));
  RunAll();
  SendResult(1, *id, Payload(100, StartsTo(1)[0]));
  RunAll();
  const v1::ProcessResult* r = observer_->ResultFor(100);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status(), v1::CAPTURE_STATUS_OK) << r->message();
  EXPECT_EQ(r->host_context().state(), v1::HostContextResult::STATE_RECORDED);
  EXPECT_EQ(fake_.finished.size(), 1u);
}

TEST_F(HostContextCoreTest, AProcessThatFailsEndsItsRecording) {
  Attach(1, 100, "42", 0);
  auto id = TraceWith({"cpu", "sched"});
  ASSERT_TRUE(id.ok());
  loop_.AdvanceBy(absl::Seconds(1));
  RunAll();
  ASSERT_EQ(fake_.started.size(), 1u);
  core_->OnPeerGone(1, /*clean=*/true, "exit");
  RunAll();
  ASSERT_EQ(fake_.finished.size(), 1u);
  fake_.AnswerAll(Recorded(nullptr));
  RunAll();
  const v1::ProcessResult* r = observer_->ResultFor(100);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status(), v1::CAPTURE_STATUS_EXITED);
  EXPECT_TRUE(observer_->done);
}

TEST_F(HostContextCoreTest, NoHostActivityRecordsNothing) {
  Attach(1, 100, "42", 0);
  auto id = TraceWith({"kernel"});
  ASSERT_TRUE(id.ok());
  loop_.AdvanceBy(absl::Seconds(3));
  SendResult(1, *id, Payload(100, StartsTo(1)[0]));
  RunAll();
  EXPECT_THAT(fake_.started, IsEmpty());
  const v1::ProcessResult* r = observer_->ResultFor(100);
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->has_host_context());
}

TEST_F(HostContextCoreTest, UnknownNamesListTheHostActivities) {
  Attach(1, 100, "42", 0);
  auto id = TraceWith({"cpu", "perf"});
  ASSERT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(id.status().message(), HasSubstr("unknown activity \"perf\""));
  EXPECT_THAT(id.status().message(), HasSubstr("overhead, memory, cpu, sched"));
}

// DWARF unwinding reaches the source with the cpu activity, and is refused
// without it (nothing would use it).
TEST_F(HostContextCoreTest, DwarfUnwindingIsAskedWithTheCpuActivityOnly) {
  Attach(1, 100, "42", 0);
  ASSERT_TRUE(TraceWith({"cpu"}, v1::HOST_UNWIND_DWARF).ok());
  RunAll();
  loop_.AdvanceBy(absl::Seconds(1));
  RunAll();
  ASSERT_EQ(fake_.started.size(), 1u);
  EXPECT_TRUE(fake_.started[0].wanted.samples);
  EXPECT_TRUE(fake_.started[0].wanted.dwarf);

  auto refused = TraceWith({"kernel", "sched"}, v1::HOST_UNWIND_DWARF);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("host_unwind DWARF needs the cpu activity"));
  auto unknown = TraceWith({"cpu"}, static_cast<v1::HostUnwind>(9));
  ASSERT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("host_unwind 9"));
}

// Each process of the trace is recorded on its own; a recording leaves the
// others out of its descendants, so a selected process that descends from
// another (a launcher's worker) is recorded once.
TEST_F(HostContextCoreTest, EachRecordingLeavesTheTracesOtherProcessesApart) {
  Attach(1, 100, "42", 0);
  Attach(2, 200, "42", 1);
  Attach(3, 300, "42", 2);
  ASSERT_TRUE(TraceWith({"kernel", "sched"}).ok());
  RunAll();
  loop_.AdvanceBy(absl::Seconds(1));
  RunAll();
  ASSERT_EQ(fake_.started.size(), 3u);
  for (const FakeHostContext::Started& started : fake_.started) {
    std::vector<int32_t> others;
    for (int32_t pid : {100, 200, 300}) {
      if (pid != started.pid) others.push_back(pid);
    }
    EXPECT_THAT(started.wanted.recorded_apart, UnorderedElementsAreArray(others)) << started.pid;
  }
}

class NoSourceTest : public DaemonCoreTest {};

TEST_F(NoSourceTest, ResultSaysHostContextIsUnavailable) {
  Attach(1, 100, "42", 0);
  v1::TraceRequest req;
  req.mutable_selector()->set_job_id("42");
  req.mutable_duration()->set_seconds(1);
  req.add_activities("cpu");
  auto observer = std::make_shared<RecordingObserver>();
  auto id = core_->StartTrace(req, observer);
  ASSERT_TRUE(id.ok()) << id.status();
  RunAll();
  loop_.AdvanceBy(absl::Milliseconds(100));
  SendResult(1, *id, Payload(100, StartsTo(1)[0]));
  RunAll();
  const v1::ProcessResult* r = observer->ResultFor(100);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status(), v1::CAPTURE_STATUS_OK) << r->message();
  EXPECT_EQ(r->host_context().state(), v1::HostContextResult::STATE_UNAVAILABLE);
  EXPECT_THAT(r->host_context().reason(), HasSubstr("without host context"));
}

}  // namespace
}  // namespace gpuctl::daemon
