// The start instant, iteration windows, late joins, roles and step counters
// as the core handles them.
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "daemon/core/proto_time.h"
#include "daemon/core/testing/core_test_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

google::protobuf::Timestamp Ts(absl::Time t) { return ToProtoTimestamp(t); }
google::protobuf::Duration Dur(absl::Duration d) { return ToProtoDuration(d); }
absl::Time FromTs(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}
absl::Duration FromDur(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

class TraceSyncTest : public DaemonCoreTest {
 protected:
  v1::TraceRequest JobRequest(const std::string& job, absl::Duration d) {
    v1::TraceRequest req;
    req.mutable_selector()->set_job_id(job);
    *req.mutable_duration() = Dur(d);
    return req;
  }
  const v1::TraceStarted& Started(const RecordingObserver& obs) {
    EXPECT_FALSE(obs.events.empty());
    EXPECT_TRUE(obs.events[0].has_started());
    return obs.events[0].started();
  }
  void SendCaptureResult(PeerId peer, v1::ipc::CaptureResult result, std::vector<uint8_t> bytes) {
    result.set_status(v1::CAPTURE_STATUS_OK);
    result.set_transport(v1::ipc::PAYLOAD_TRANSPORT_MEMFD);
    result.set_payload_size(bytes.size());
    core_->OnCaptureResult(peer, result, std::make_unique<VectorPayload>(std::move(bytes)));
  }
  // A payload for a window of [start, end).
  std::vector<uint8_t> WindowPayload(int pid, int64_t start_ns, int64_t end_ns) {
    PayloadBuilder b(pid, start_ns, end_ns);
    b.AddThreadName(static_cast<uint32_t>(pid), "main");
    b.AddRange(static_cast<uint32_t>(pid), start_ns + 100, start_ns + 200, "fwd", 0, 1);
    return b.Build();
  }
};

TEST_F(TraceSyncTest, UsesTheRequestedStartInstantAndRecordsTheClockOffset) {
  Attach(1, 100, "42", 0);
  Attach(2, 101, "42", 1);
  const absl::Time now = clock_.Now();
  const absl::Time start = now + absl::Seconds(2);
  v1::TraceRequest req = JobRequest("42", absl::Seconds(3));
  *req.mutable_start_time() = Ts(start);
  *req.mutable_max_start_skew() = Dur(absl::Milliseconds(20));
  *req.mutable_caller_time() = Ts(now - absl::Milliseconds(3));
  auto obs = std::make_shared<RecordingObserver>();
  auto id = core_->StartTrace(req, obs);
  ASSERT_TRUE(id.ok()) << id.status();

  for (PeerId peer : {1, 2}) {
    ASSERT_EQ(StartsTo(peer).size(), 1u);
    const v1::ipc::StartCapture& s = StartsTo(peer)[0];
    EXPECT_EQ(s.start_time_unix_ns(), absl::ToUnixNanos(start));
    EXPECT_EQ(s.duration_ns(), 3'000'000'000);
    EXPECT_EQ(s.max_start_skew_ns(), 20'000'000);
    EXPECT_EQ(s.iterations(), 0u);
  }
  const v1::TraceStarted& started = Started(*obs);
  EXPECT_EQ(FromTs(started.start_time()), start);
  EXPECT_EQ(FromTs(started.end_time()), start + absl::Seconds(3));
  EXPECT_EQ(FromTs(started.received_at()), now);
  EXPECT_EQ(FromDur(started.max_start_skew()), absl::Milliseconds(20));
  EXPECT_EQ(FromDur(started.clock().offset()), absl::Milliseconds(3));
  EXPECT_EQ(FromTs(started.clock().caller_time()), now - absl::Milliseconds(3));
  EXPECT_EQ(FromTs(started.clock().received_at()), now);
  ASSERT_EQ(started.processes_size(), 2);
  EXPECT_EQ(started.processes(0).role(), v1::PROCESS_ROLE_WORKER);

  // The deadline runs from the start instant: window plus grace.
  loop_.AdvanceBy(absl::Seconds(2 + 3 + 10) - absl::Nanoseconds(1));
  EXPECT_TRUE(obs->Results().empty());
  loop_.AdvanceBy(absl::Nanoseconds(1));
  RunAll();
  ASSERT_TRUE(obs->done);
  EXPECT_EQ(obs->ResultFor(100)->status(), v1::CAPTURE_STATUS_TIMED_OUT);
  EXPECT_THAT(obs->ResultFor(100)->message(), HasSubstr("no result within 13s of the window start"));

  auto manifest = store_->GetManifest(*id);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(FromTs(manifest->start_time()), start);
  EXPECT_EQ(FromDur(manifest->max_start_skew()), absl::Milliseconds(20));
  EXPECT_EQ(FromDur(manifest->clock().offset()), absl::Milliseconds(3));
  EXPECT_EQ(manifest->selector(), "job \"42\"");
  EXPECT_EQ(manifest->iterations(), 0u);
}

TEST_F(TraceSyncTest, DefaultsWithoutStartTimeSkewOrCallerTime) {
  Attach(1, 100, "42");
  auto obs = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(core_->StartTrace(JobRequest("42", absl::Seconds(1)), obs).ok());
  ASSERT_EQ(StartsTo(1).size(), 1u);
  EXPECT_EQ(StartsTo(1)[0].start_time_unix_ns(),
            absl::ToUnixNanos(clock_.Now() + options_.start_delay));
  EXPECT_EQ(StartsTo(1)[0].max_start_skew_ns(), 50'000'000);
  EXPECT_EQ(FromDur(Started(*obs).max_start_skew()), absl::Milliseconds(50));
  EXPECT_FALSE(Started(*obs).has_clock());
  EXPECT_TRUE(Started(*obs).has_received_at());
}

TEST_F(TraceSyncTest, AZeroSkewIsSentAsOneNanosecond) {
  Attach(1, 100, "42");
  v1::TraceRequest req = JobRequest("42", absl::Seconds(1));
  *req.mutable_max_start_skew() = Dur(absl::ZeroDuration());
  ASSERT_TRUE(core_->StartTrace(req, std::make_shared<RecordingObserver>()).ok());
  EXPECT_EQ(StartsTo(1)[0].max_start_skew_ns(), 1) << "0 on the wire means the default";
}

TEST_F(TraceSyncTest, APastStartDoesNotTimeOutEarly) {
  Attach(1, 100, "42");
  v1::TraceRequest req = JobRequest("42", absl::Seconds(2));
  *req.mutable_start_time() = Ts(clock_.Now() - absl::Seconds(30));
  auto obs = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(core_->StartTrace(req, obs).ok());
  EXPECT_EQ(StartsTo(1)[0].start_time_unix_ns(),
            absl::ToUnixNanos(clock_.Now() - absl::Seconds(30)));
  // The process opens at once and runs 2s: the deadline is now + 2s + 10s.
  loop_.AdvanceBy(absl::Seconds(12) - absl::Nanoseconds(1));
  EXPECT_TRUE(obs->Results().empty());
  loop_.AdvanceBy(absl::Nanoseconds(1));
  ASSERT_EQ(obs->Results().size(), 1u);
  EXPECT_EQ(obs->Results()[0].status(), v1::CAPTURE_STATUS_TIMED_OUT);
}

TEST_F(TraceSyncTest, RefusesBadInstantsSkewsAndSteps) {
  Attach(1, 100, "42");
  auto refused = [&](v1::TraceRequest req) {
    absl::Status st = core_->StartTrace(req, std::make_shared<RecordingObserver>()).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    return std::string(st.message());
  };
  const absl::Time now = clock_.Now();
  v1::TraceRequest req = JobRequest("42", absl::Seconds(1));
  *req.mutable_start_time() = Ts(now + absl::Hours(1) + absl::Nanoseconds(1));
  EXPECT_THAT(refused(req), HasSubstr("ahead of this daemon's clock, more than 1h"));
  req.mutable_start_time()->set_nanos(-1);
  EXPECT_THAT(refused(req), HasSubstr("start_time is not a valid instant"));
  *req.mutable_start_time() = Ts(absl::UnixEpoch() - absl::Seconds(1));
  EXPECT_THAT(refused(req), HasSubstr("start_time is not a valid instant"));
  req.clear_start_time();

  *req.mutable_max_start_skew() = Dur(absl::Milliseconds(-1));
  EXPECT_EQ(refused(req), "max_start_skew -1ms is not between 0 and 1h");
  *req.mutable_max_start_skew() = Dur(absl::Hours(1) + absl::Seconds(1));
  EXPECT_EQ(refused(req), "max_start_skew 1h1s is not between 0 and 1h");
  req.clear_max_start_skew();

  req.mutable_caller_time()->set_nanos(1'000'000'000);
  EXPECT_THAT(refused(req), HasSubstr("caller_time is not a valid instant"));
  req.clear_caller_time();

  req.set_iterations(1'000'001);
  EXPECT_EQ(refused(req), "iterations 1000001 exceeds the maximum of 1000000");
  req.set_iterations(0);
  req.set_start_step(5);
  EXPECT_EQ(refused(req), "start_step needs iterations (an iteration window)");
  req.set_iterations(1);
  req.set_start_step(uint64_t{1} << 63);
  EXPECT_THAT(refused(req), HasSubstr("start_step 9223372036854775808 exceeds the maximum"));
  EXPECT_TRUE(peers_.sent().empty());

  // Exactly an hour ahead is accepted.
  req = JobRequest("42", absl::Seconds(1));
  *req.mutable_start_time() = Ts(now + absl::Hours(1));
  *req.mutable_max_start_skew() = Dur(absl::Hours(1));
  EXPECT_TRUE(core_->StartTrace(req, std::make_shared<RecordingObserver>()).ok());
}

TEST_F(TraceSyncTest, ResultsCarryTheStartSkewAndALateStart) {
  Attach(1, 100, "42", 0);
  Attach(2, 101, "42", 1);
  Attach(3, 102, "42", -1);
  v1::TraceRequest req = JobRequest("42", absl::Seconds(2));
  *req.mutable_max_start_skew() = Dur(absl::Milliseconds(20));
  auto obs = std::make_shared<RecordingObserver>();
  auto id = core_->StartTrace(req, obs);
  ASSERT_TRUE(id.ok());
  const int64_t start = StartsTo(1)[0].start_time_unix_ns();
  const int64_t ms = 1'000'000;

  v1::ipc::CaptureStarted cs;
  cs.set_trace_id(*id);
  cs.set_opened_at_unix_ns(start + 300 * ms);
  cs.set_late_start(true);
  core_->OnCaptureStarted(2, cs);
  ASSERT_FALSE(obs->events.empty());
  EXPECT_EQ(obs->events.back().progress().message(),
            "opened 300ms after the start instant, beyond the max start skew 20ms");

  v1::ipc::CaptureResult on_time;
  on_time.set_trace_id(*id);
  on_time.set_window_start_unix_ns(start + 3 * ms);
  on_time.set_window_end_unix_ns(start + 2000 * ms);
  SendCaptureResult(1, on_time, WindowPayload(100, start + 3 * ms, start + 2000 * ms));
  v1::ipc::CaptureResult late = on_time;
  late.set_window_start_unix_ns(start + 300 * ms);
  late.set_window_end_unix_ns(start + 2300 * ms);
  late.set_late_start(true);
  late.set_message("this message is the library's");
  SendCaptureResult(2, late, WindowPayload(101, start + 300 * ms, start + 2300 * ms));
  v1::ipc::CaptureResult early = on_time;  // a clock a little behind
  early.set_window_start_unix_ns(start - 1 * ms);
  SendCaptureResult(3, early, WindowPayload(102, start - 1 * ms, start + 2000 * ms));
  RunAll();
  ASSERT_TRUE(obs->done);

  const v1::ProcessResult* r = obs->ResultFor(100);
  EXPECT_EQ(r->status(), v1::CAPTURE_STATUS_OK) << r->message();
  EXPECT_EQ(FromDur(r->start_skew()), absl::Milliseconds(3));
  EXPECT_FALSE(r->late_start());
  EXPECT_EQ(r->message(), "");
  r = obs->ResultFor(101);
  EXPECT_EQ(r->status(), v1::CAPTURE_STATUS_OK) << r->message();
  EXPECT_EQ(FromDur(r->start_skew()), absl::Milliseconds(300));
  EXPECT_TRUE(r->late_start());
  EXPECT_EQ(r->message(),
            "opened 300ms after the start instant, beyond the max start skew 20ms: the window ran "
            "2s from its opening");
  r = obs->ResultFor(102);
  EXPECT_EQ(FromDur(r->start_skew()), absl::ZeroDuration()) << "clamped at zero";
  EXPECT_TRUE(r->has_start_skew());
}

TEST_F(TraceSyncTest, IterationWindowPicksTheStartStepFromTheSelectedProcesses) {
  const absl::Time now = clock_.Now();
  AttachStepping(1, 100, "42", 0, StepsAt(10, now, absl::Milliseconds(100)));
  AttachStepping(2, 101, "42", 1, StepsAt(37, now, absl::Milliseconds(100)));
  Attach(3, 102, "42", 2);  // shares no counter
  AttachStepping(4, 103, "7", 0, StepsAt(5000, now, absl::Milliseconds(100)));  // not selected
  v1::TraceRequest req;
  req.mutable_selector()->set_job_id("42");
  req.set_iterations(3);
  auto obs = std::make_shared<RecordingObserver>();
  auto id = core_->StartTrace(req, obs);
  ASSERT_TRUE(id.ok()) << id.status();

  // The largest step is 37: next multiple of 1 above 37 + 2.
  for (PeerId peer : {1, 2, 3}) {
    ASSERT_EQ(StartsTo(peer).size(), 1u);
    const v1::ipc::StartCapture& s = StartsTo(peer)[0];
    EXPECT_EQ(s.start_step(), 40u);
    EXPECT_EQ(s.iterations(), 3u);
    EXPECT_EQ(s.start_time_unix_ns(), absl::ToUnixNanos(now)) << "watch from receipt";
    EXPECT_EQ(s.duration_ns(), absl::ToInt64Nanoseconds(options_.max_duration)) << "the bound";
    EXPECT_EQ(s.max_start_skew_ns(), 0);
  }
  const v1::TraceStarted& started = Started(*obs);
  EXPECT_EQ(started.start_step(), 40u);
  EXPECT_EQ(started.iterations(), 3u);
  EXPECT_EQ(FromTs(started.start_time()), now);
  EXPECT_EQ(FromTs(started.end_time()), now + options_.max_duration);
  EXPECT_EQ(started.processes(1).current_step(), 37u);

  v1::ipc::CaptureStarted cs;
  cs.set_trace_id(*id);
  cs.set_first_step(40);
  core_->OnCaptureStarted(1, cs);
  EXPECT_EQ(obs->events.back().progress().message(), "opened at step 40");

  const int64_t t0 = absl::ToUnixNanos(now + absl::Seconds(3));
  v1::ipc::CaptureResult full;
  full.set_trace_id(*id);
  full.set_window_start_unix_ns(t0);
  full.set_window_end_unix_ns(t0 + 300'000'000);
  full.set_first_step(40);
  full.set_steps(3);
  SendCaptureResult(1, full, WindowPayload(100, t0, t0 + 300'000'000));
  v1::ipc::CaptureResult partial = full;
  partial.set_steps(2);
  SendCaptureResult(2, partial, WindowPayload(101, t0, t0 + 300'000'000));
  v1::ipc::CaptureResult never;
  never.set_trace_id(*id);
  never.set_status(v1::CAPTURE_STATUS_TIMED_OUT);
  never.set_message("did not reach step 40 within 10m (last step 12)");
  core_->OnCaptureResult(3, never, nullptr);
  RunAll();
  ASSERT_TRUE(obs->done);

  const v1::ProcessResult* r = obs->ResultFor(100);
  EXPECT_EQ(r->status(), v1::CAPTURE_STATUS_OK) << r->message();
  EXPECT_EQ(r->first_step(), 40u);
  EXPECT_EQ(r->steps(), 3u);
  EXPECT_EQ(r->message(), "");
  EXPECT_FALSE(r->has_start_skew()) << "no start instant to be late for";
  r = obs->ResultFor(101);
  EXPECT_EQ(r->steps(), 2u);
  EXPECT_EQ(r->message(), "captured steps 40-41 of 40-42 before the bound");
  r = obs->ResultFor(102);
  EXPECT_EQ(r->status(), v1::CAPTURE_STATUS_TIMED_OUT);
  EXPECT_EQ(r->message(), "did not reach step 40 within 10m (last step 12)");
  EXPECT_FALSE(r->has_window_start()) << "an iteration window has no window to assume";

  auto manifest = store_->GetManifest(*id);
  ASSERT_TRUE(manifest.ok());
  EXPECT_EQ(manifest->iterations(), 3u);
  EXPECT_EQ(manifest->start_step(), 40u);
  EXPECT_EQ(FromDur(manifest->duration()), options_.max_duration);
  EXPECT_FALSE(manifest->has_max_start_skew());
}

TEST_F(TraceSyncTest, IterationWindowRoundsUpOrTakesTheRequestedStep) {
  const absl::Time now = clock_.Now();
  auto steps = AttachStepping(1, 100, "42", 0, StepsAt(1234, now, absl::Milliseconds(10)));
  v1::TraceRequest req = JobRequest("42", absl::Seconds(30));
  req.set_iterations(2);
  req.set_step_roundup(100);
  req.set_step_margin(10);
  auto obs = std::make_shared<RecordingObserver>();
  auto id = core_->StartTrace(req, obs);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(StartsTo(1)[0].start_step(), 1300u);
  EXPECT_EQ(StartsTo(1)[0].duration_ns(), 30'000'000'000);
  core_->CancelTrace(*id);
  RunAll();

  peers_.Clear();
  steps->current_step = 1290;
  ASSERT_TRUE(core_->StartTrace(req, std::make_shared<RecordingObserver>()).ok());
  EXPECT_EQ(StartsTo(1)[0].start_step(), 1400u);
  core_->CancelTrace(StartsTo(1)[0].trace_id());
  RunAll();

  peers_.Clear();
  req.set_start_step(7);
  ASSERT_TRUE(core_->StartTrace(req, std::make_shared<RecordingObserver>()).ok());
  EXPECT_EQ(StartsTo(1)[0].start_step(), 7u) << "the caller's step (a fleet-wide choice) wins";
  core_->CancelTrace(StartsTo(1)[0].trace_id());
  RunAll();

  // Nobody has a step yet: m = -1.
  peers_.Clear();
  steps->has_step = false;
  req.clear_start_step();
  ASSERT_TRUE(core_->StartTrace(req, std::make_shared<RecordingObserver>()).ok());
  EXPECT_EQ(StartsTo(1)[0].start_step(), 100u);
}

TEST_F(TraceSyncTest, IterationWindowTimesOutAtTheBoundPlusGrace) {
  AttachStepping(1, 100, "42", 0, StepsAt(1, clock_.Now(), absl::Seconds(1)));
  v1::TraceRequest req = JobRequest("42", absl::Seconds(20));
  req.set_iterations(1);
  auto obs = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(core_->StartTrace(req, obs).ok());
  loop_.AdvanceBy(absl::Seconds(30) - absl::Nanoseconds(1));
  EXPECT_TRUE(obs->Results().empty());
  loop_.AdvanceBy(absl::Nanoseconds(1));
  ASSERT_EQ(obs->Results().size(), 1u);
  EXPECT_EQ(obs->Results()[0].message(),
            "no result within 30s of the request (the 20s bound on the wait for step 4 plus 10s "
            "grace)");
}

TEST_F(TraceSyncTest, AProcessAttachingDuringATimeWindowJoinsIt) {
  Attach(1, 100, "42", 0);
  auto obs = std::make_shared<RecordingObserver>();
  v1::TraceRequest req = JobRequest("42", absl::Seconds(2));
  *req.mutable_max_start_skew() = Dur(absl::Milliseconds(20));
  auto id = core_->StartTrace(req, obs);
  ASSERT_TRUE(id.ok());
  const v1::ipc::StartCapture first = StartsTo(1)[0];

  loop_.AdvanceBy(absl::Seconds(1));
  Attach(2, 101, "42", 1);
  Attach(3, 102, "7", 0);  // another job: not joined
  ASSERT_EQ(StartsTo(2).size(), 1u);
  EXPECT_TRUE(StartsTo(3).empty());
  const v1::ipc::StartCapture joined = StartsTo(2)[0];
  EXPECT_EQ(joined.trace_id(), *id);
  EXPECT_EQ(joined.start_time_unix_ns(), first.start_time_unix_ns());
  EXPECT_EQ(joined.duration_ns(), first.duration_ns());
  EXPECT_EQ(joined.max_start_skew_ns(), 20'000'000);
  const v1::TraceEvent& event = obs->events.back();
  ASSERT_TRUE(event.has_progress());
  EXPECT_EQ(event.progress().pid(), 101);
  EXPECT_EQ(event.progress().phase(), v1::PROCESS_PHASE_REQUESTED);
  EXPECT_EQ(event.progress().joined().pid(), 101);
  EXPECT_EQ(event.progress().joined().rank(), 1);
  EXPECT_EQ(core_->ListProcesses({})->processes(1).capture_state(), v1::CAPTURE_STATE_ARMED);

  // The first process delivers; the joiner opened late and runs its full
  // window from now, so the deadline waits for it.
  const int64_t s = first.start_time_unix_ns();
  v1::ipc::CaptureResult result;
  result.set_trace_id(*id);
  result.set_window_start_unix_ns(s);
  result.set_window_end_unix_ns(s + 2'000'000'000);
  SendCaptureResult(1, result, WindowPayload(100, s, s + 2'000'000'000));
  RunAll();
  loop_.AdvanceBy(absl::Seconds(2 + 10) - absl::Nanoseconds(1));
  EXPECT_EQ(obs->ResultFor(101), nullptr) << "not timed out at the original deadline";
  loop_.AdvanceBy(absl::Nanoseconds(1));
  RunAll();
  ASSERT_TRUE(obs->done);
  EXPECT_FALSE(obs->ResultFor(100)->joined_late());
  const v1::ProcessResult* late = obs->ResultFor(101);
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(late->status(), v1::CAPTURE_STATUS_TIMED_OUT);
  EXPECT_TRUE(late->joined_late());
  auto manifest = store_->GetManifest(*id);
  ASSERT_TRUE(manifest.ok());
  ASSERT_EQ(manifest->results_size(), 2);
  EXPECT_TRUE(manifest->results(1).joined_late());
}

TEST_F(TraceSyncTest, NoJoinAfterTheWindowOrForPidsOrLimitedSelectors) {
  Attach(1, 100, "42", 0);
  auto id = core_->StartTrace(JobRequest("42", absl::Seconds(2)), std::make_shared<RecordingObserver>());
  ASSERT_TRUE(id.ok());
  loop_.AdvanceBy(options_.start_delay + absl::Seconds(2));
  Attach(2, 101, "42", 1);
  EXPECT_TRUE(StartsTo(2).empty()) << "the window is over";

  v1::TraceRequest by_pid;
  by_pid.mutable_selector()->add_pids(102);
  by_pid.mutable_selector()->set_job_id("8");
  *by_pid.mutable_duration() = Dur(absl::Seconds(5));
  Attach(3, 102, "8", 0);
  ASSERT_TRUE(core_->StartTrace(by_pid, std::make_shared<RecordingObserver>()).ok());
  Attach(4, 103, "8", 1);
  EXPECT_TRUE(StartsTo(4).empty()) << "a selector with pids names its processes";

  v1::TraceRequest limited = JobRequest("9", absl::Seconds(5));
  limited.mutable_selector()->set_limit(1);
  Attach(5, 104, "9", 0);
  ASSERT_TRUE(core_->StartTrace(limited, std::make_shared<RecordingObserver>()).ok());
  Attach(6, 105, "9", 1);
  EXPECT_TRUE(StartsTo(6).empty()) << "a limited selector has its processes";
}

TEST_F(TraceSyncTest, AProcessAttachingDuringAnIterationWindowJoinsWithTheSameSteps) {
  AttachStepping(1, 100, "42", 0, StepsAt(998, clock_.Now(), absl::Milliseconds(2)));
  v1::TraceRequest req = JobRequest("42", absl::Seconds(60));
  req.set_iterations(2);
  req.set_step_roundup(500);
  auto obs = std::make_shared<RecordingObserver>();
  auto id = core_->StartTrace(req, obs);
  ASSERT_TRUE(id.ok());
  ASSERT_EQ(StartsTo(1)[0].start_step(), 1500u);
  loop_.AdvanceBy(absl::Seconds(1));
  // Its counter is far beyond: the library will say so; the daemon keeps
  // the trace's steps.
  AttachStepping(2, 101, "42", 1, StepsAt(5000, clock_.Now(), absl::Milliseconds(2)));
  ASSERT_EQ(StartsTo(2).size(), 1u);
  EXPECT_EQ(StartsTo(2)[0].start_step(), 1500u);
  EXPECT_EQ(StartsTo(2)[0].iterations(), 2u);
  EXPECT_EQ(StartsTo(2)[0].start_time_unix_ns(), StartsTo(1)[0].start_time_unix_ns());
  EXPECT_EQ(StartsTo(2)[0].duration_ns(), StartsTo(1)[0].duration_ns()) << "the same bound";
  EXPECT_EQ(obs->events.back().progress().joined().current_step(), 5000u);
}

TEST_F(TraceSyncTest, ALibraryWithoutIterationWindowsIsUnavailableForThem) {
  AttachStepping(1, 100, "42", 0, StepsAt(3, clock_.Now(), absl::Seconds(1)));
  v1::ipc::Hello old = MakeHello(101, "42", 1);
  old.set_capabilities(v1::ipc::CAPABILITY_MEMFD | v1::ipc::CAPABILITY_HOST_RANGES);
  old.set_library_version("0.0.9");
  ASSERT_TRUE(core_->OnPeerHello(2, {101, 1000, 1000}, old, nullptr).ok());
  v1::TraceRequest req;
  req.mutable_selector()->set_job_id("42");
  req.set_iterations(2);
  auto obs = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(core_->StartTrace(req, obs).ok());
  EXPECT_EQ(StartsTo(1).size(), 1u);
  EXPECT_TRUE(StartsTo(2).empty()) << "it would take the bound for a time window";
  const v1::ProcessResult* r = obs->ResultFor(101);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status(), v1::CAPTURE_STATUS_UNAVAILABLE);
  EXPECT_EQ(r->message(),
            "its gpuctl library (0.0.9) does not capture iteration windows; update it");
  // Nor does such a process join one.
  v1::ipc::Hello later = old;
  later.set_pid(102);
  ASSERT_TRUE(core_->OnPeerHello(3, {102, 1000, 1000}, later, nullptr).ok());
  EXPECT_TRUE(StartsTo(3).empty());
  // A time window is fine for it.
  v1::ipc::Hello other_job = old;
  other_job.set_pid(103);
  other_job.set_job_id("8");
  ASSERT_TRUE(core_->OnPeerHello(4, {103, 1000, 1000}, other_job, nullptr).ok());
  v1::TraceRequest timed = JobRequest("8", absl::Seconds(1));
  ASSERT_TRUE(core_->StartTrace(timed, std::make_shared<RecordingObserver>()).ok());
  EXPECT_EQ(StartsTo(4).size(), 1u);
}

// A launcher with two ranks, each with a forked helper, in a fake /proc.
class TraceRolesTest : public TraceSyncTest {
 protected:
  void SetUp() override {
    TraceSyncTest::SetUp();
    proc_ = tmp_ + "/proc";
    for (auto [pid, ppid] : std::vector<std::pair<int, int>>{
             {100, 1}, {200, 100}, {201, 100}, {300, 200}, {301, 201}, {302, 201}}) {
      std::filesystem::create_directories(absl::StrCat(proc_, "/", pid));
      std::ofstream(absl::StrCat(proc_, "/", pid, "/stat"))
          << pid << " (python3) S " << ppid << " 1 1 0\n";
    }
    options_.proc_root = proc_;
    MakeCore();
  }
  std::string proc_;
};

TEST_F(TraceRolesTest, TracesWorkersListsRolesAndHelpersDoNotJoin) {
  Attach(1, 100, "9", -1);
  Attach(2, 200, "9", 0);
  Attach(3, 201, "9", 1);
  Attach(4, 300, "9", 0);
  auto listed = core_->ListProcesses({});
  ASSERT_TRUE(listed.ok());
  std::vector<v1::ProcessRole> roles;
  for (const auto& p : listed->processes()) roles.push_back(p.role());
  EXPECT_THAT(roles, ElementsAre(v1::PROCESS_ROLE_LAUNCHER, v1::PROCESS_ROLE_WORKER,
                                 v1::PROCESS_ROLE_WORKER, v1::PROCESS_ROLE_HELPER));
  EXPECT_EQ(listed->processes(1).ppid(), 100) << "from /proc";

  auto obs = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(core_->StartTrace(JobRequest("9", absl::Seconds(2)), obs).ok());
  EXPECT_TRUE(StartsTo(1).empty());
  EXPECT_EQ(StartsTo(2).size(), 1u);
  EXPECT_EQ(StartsTo(3).size(), 1u);
  EXPECT_TRUE(StartsTo(4).empty());
  // A helper forked by rank 1 while the trace runs is not a rank: it does
  // not join.
  Attach(5, 301, "9", 1);
  EXPECT_TRUE(StartsTo(5).empty());
  // A process of the job started under the launcher while the trace runs
  // is a worker of its own rank: it joins.
  std::filesystem::create_directories(proc_ + "/202");
  std::ofstream(proc_ + "/202/stat") << "202 (python3) S 100 1 1 0\n";
  Attach(6, 202, "9", 2);
  EXPECT_EQ(StartsTo(6).size(), 1u);
}

TEST_F(TraceRolesTest, NothingMatchedSaysWhatWasLeftOut) {
  Attach(1, 100, "9", -1);
  Attach(2, 200, "9", 0);
  v1::ipc::Hello loader = MakeHello(300, "9", 0);
  loader.add_labels("kind=loader");
  ASSERT_TRUE(core_->OnPeerHello(4, {300, 1000, 1000}, loader, nullptr).ok());

  v1::TraceRequest req;
  req.mutable_selector()->set_job_id("9");
  req.mutable_selector()->add_pids(300);
  v1::RankRange* r = req.mutable_selector()->add_ranks();
  r->set_first(5);
  r->set_last(6);
  *req.mutable_duration() = Dur(absl::Seconds(1));
  absl::Status st = core_->StartTrace(req, std::make_shared<RecordingObserver>()).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(st.message(),
            "no attached process matches job \"9\" and pids [300] and ranks 5-6 on host h1 (3 "
            "attached: job \"9\" x3)");

  // Only the helper has the label: it matches but is not a rank.
  v1::TraceRequest by_label;
  (*by_label.mutable_selector()->mutable_labels())["kind"] = "loader";
  *by_label.mutable_duration() = Dur(absl::Seconds(1));
  st = core_->StartTrace(by_label, std::make_shared<RecordingObserver>()).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(st.message(),
            "no attached process matches label kind=loader on host h1 (3 attached: job \"9\" x3; 1 "
            "matched but are launchers or helpers, which include_helpers selects)");
  by_label.mutable_selector()->set_include_helpers(true);
  auto obs = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(core_->StartTrace(by_label, obs).ok());
  ASSERT_EQ(Started(*obs).processes_size(), 1);
  EXPECT_EQ(Started(*obs).processes(0).pid(), 300);
  EXPECT_EQ(Started(*obs).processes(0).role(), v1::PROCESS_ROLE_HELPER);
}

TEST_F(TraceSyncTest, ListProcessesShowsLabelsAndLiveSteps) {
  const absl::Time now = clock_.Now();
  v1::ipc::Hello hello = MakeHello(100, "42", 0);
  hello.set_protocol_minor(1);
  hello.add_labels("team=ml");
  hello.add_labels("k8s.pod=trainer-0");
  auto reading = StepsAt(41, now - absl::Seconds(1), absl::Milliseconds(250));
  ASSERT_TRUE(
      core_->OnPeerHello(1, {100, 1000, 1000}, hello, std::make_unique<FakeStepCounter>(reading))
          .ok());
  // A minor-0 Hello: no labels, no counter.
  Attach(2, 101, "42", 1);

  auto listed = core_->ListProcesses({});
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->processes_size(), 2);
  const v1::ProcessInfo& p = listed->processes(0);
  EXPECT_EQ(p.labels().at("team"), "ml");
  EXPECT_EQ(p.labels().at("k8s.pod"), "trainer-0");
  ASSERT_TRUE(p.has_current_step());
  EXPECT_EQ(p.current_step(), 41u);
  EXPECT_EQ(FromTs(p.last_step_time()), now - absl::Seconds(1));
  EXPECT_EQ(FromDur(p.step_period()), absl::Milliseconds(250));
  EXPECT_EQ(p.role(), v1::PROCESS_ROLE_WORKER);
  const v1::ProcessInfo& q = listed->processes(1);
  EXPECT_FALSE(q.has_current_step());
  EXPECT_FALSE(q.has_last_step_time());
  EXPECT_FALSE(q.has_step_period());
  EXPECT_TRUE(q.labels().empty());

  reading->current_step = 42;  // read live
  reading->period.reset();
  listed = core_->ListProcesses({});
  EXPECT_EQ(listed->processes(0).current_step(), 42u);
  EXPECT_FALSE(listed->processes(0).has_step_period());

  v1::ListProcessesRequest by_label;
  (*by_label.mutable_selector()->mutable_labels())["team"] = "ml";
  ASSERT_EQ(core_->ListProcesses(by_label)->processes_size(), 1);
  v1::ListProcessesRequest bad;
  v1::RankRange* r = bad.mutable_selector()->add_ranks();
  r->set_first(3);
  r->set_last(1);
  EXPECT_EQ(core_->ListProcesses(bad).status().code(), absl::StatusCode::kInvalidArgument);

  // A broken label refuses the Hello.
  v1::ipc::Hello broken = MakeHello(102, "42", 1);
  broken.add_labels("no-equals-sign");
  EXPECT_EQ(core_->OnPeerHello(3, {102, 1000, 1000}, broken, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->GetStatus().attached_processes(), 2u);
  EXPECT_EQ(core_->GetStatus().ipc_protocol_minor(), 1u);
}

TEST_F(TraceSyncTest, TracesByRankAndLabelAndDescribesTheSelector) {
  v1::ipc::Hello a = MakeHello(100, "42", 0);
  a.add_labels("team=ml");
  ASSERT_TRUE(core_->OnPeerHello(1, {100, 1000, 1000}, a, nullptr).ok());
  v1::ipc::Hello b = MakeHello(101, "42", 1);
  b.add_labels("team=ml");
  ASSERT_TRUE(core_->OnPeerHello(2, {101, 1000, 1000}, b, nullptr).ok());
  Attach(3, 102, "42", 0);  // no label
  v1::TraceRequest req;
  v1::RankRange* r = req.mutable_selector()->add_ranks();
  r->set_first(0);
  r->set_last(0);
  (*req.mutable_selector()->mutable_labels())["team"] = "ml";
  *req.mutable_duration() = Dur(absl::Seconds(1));
  auto obs = std::make_shared<RecordingObserver>();
  auto id = core_->StartTrace(req, obs);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(StartsTo(1).size(), 1u);
  EXPECT_TRUE(StartsTo(2).empty());
  EXPECT_TRUE(StartsTo(3).empty());
  core_->CancelTrace(*id);
  RunAll();
  auto manifest = store_->GetManifest(*id);
  ASSERT_TRUE(manifest.ok());
  EXPECT_EQ(manifest->selector(), "rank 0 and label team=ml");

  v1::TraceRequest bad = req;
  r = bad.mutable_selector()->add_ranks();
  r->set_first(5);
  r->set_last(2);
  absl::Status st = core_->StartTrace(bad, obs).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "rank range 5-2 is empty: its first rank exceeds its last");
}

}  // namespace
}  // namespace gpuctl::daemon
