// The start instant of time windows and the steps of iteration windows, as
// the core handles them.
#include "daemon/core/testing/trace_test_fixture.h"
#include "daemon/core/trace_request.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;

TEST_F(TraceTest, UsesTheRequestedStartInstantAndRecordsTheClockOffset) {
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
    const v1::ipc::StartCapture s = StartsTo(peer)[0];
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
  EXPECT_THAT(obs->ResultFor(100)->message(),
              HasSubstr("no result within 13s of the window start"));

  auto manifest = store_->GetManifest(*id);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(FromTs(manifest->start_time()), start);
  EXPECT_EQ(FromDur(manifest->max_start_skew()), absl::Milliseconds(20));
  EXPECT_EQ(FromDur(manifest->clock().offset()), absl::Milliseconds(3));
  EXPECT_EQ(manifest->selector(), "job \"42\"");
  EXPECT_EQ(manifest->iterations(), 0u);
}

// A measured round trip is kept beside the caller_time offset, which
// keeps its meaning.
TEST_F(TraceTest, RecordsTheCallersMeasuredMidpointAndRoundTrip) {
  Attach(1, 100, "42");
  const absl::Time now = clock_.Now();
  v1::TraceRequest req = JobRequest("42", absl::Seconds(1));
  *req.mutable_caller_time() = Ts(now - absl::Milliseconds(3));
  *req.mutable_caller_clock()->mutable_offset() = Dur(absl::Microseconds(-2500));
  *req.mutable_caller_clock()->mutable_round_trip() = Dur(absl::Microseconds(400));
  req.mutable_caller_clock()->set_probes(4);
  auto obs = std::make_shared<RecordingObserver>();
  auto id = core_->StartTrace(req, obs);
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::TraceStarted& started = Started(*obs);
  EXPECT_EQ(FromDur(started.clock().offset()), absl::Milliseconds(3));
  EXPECT_EQ(FromDur(started.clock().midpoint_offset()), absl::Microseconds(-2500));
  EXPECT_EQ(FromDur(started.clock().round_trip()), absl::Microseconds(400));
  // Past the window and its grace: the manifest is written.
  loop_.AdvanceBy(absl::Minutes(1));
  RunAll();
  ASSERT_TRUE(obs->done);
  auto manifest = store_->GetManifest(*id);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(FromDur(manifest->clock().offset()), absl::Milliseconds(3));
  EXPECT_EQ(FromDur(manifest->clock().midpoint_offset()), absl::Microseconds(-2500));
  EXPECT_EQ(FromDur(manifest->clock().round_trip()), absl::Microseconds(400));
}

TEST_F(TraceTest, RefusesAnImplausibleCallerClock) {
  Attach(1, 100, "42");
  const absl::Time now = clock_.Now();
  v1::TraceRequest req = JobRequest("42", absl::Seconds(1));
  v1::CallerClock* measured = req.mutable_caller_clock();
  *measured->mutable_round_trip() = Dur(absl::Microseconds(300));
  EXPECT_EQ(Refused(req), "caller_clock needs caller_time");

  *req.mutable_caller_time() = Ts(now);
  *measured->mutable_round_trip() = Dur(absl::Microseconds(-300));
  EXPECT_EQ(Refused(req), "caller_clock.round_trip -300us is not in (0, 1m]");
  measured->clear_round_trip();
  EXPECT_EQ(Refused(req), "caller_clock.round_trip 0 is not in (0, 1m]");
  *measured->mutable_round_trip() = Dur(absl::Minutes(1) + absl::Nanoseconds(1));
  EXPECT_EQ(Refused(req), "caller_clock.round_trip 1m0.000000001s is not in (0, 1m]");
  measured->mutable_round_trip()->set_seconds(1);
  measured->mutable_round_trip()->set_nanos(-1);
  EXPECT_THAT(Refused(req), HasSubstr("caller_clock.round_trip: malformed duration"));

  *measured->mutable_round_trip() = Dur(absl::Microseconds(300));
  *measured->mutable_offset() = Dur(-kMaxCallerClockOffset - absl::Seconds(1));
  EXPECT_THAT(Refused(req),
              HasSubstr("caller_clock.offset -876600h1s is more than 876600h either way"));
  measured->mutable_offset()->set_seconds(INT64_MAX);
  EXPECT_THAT(Refused(req), HasSubstr("is more than 876600h either way (not a clock offset)"));
  measured->mutable_offset()->set_seconds(-1);
  measured->mutable_offset()->set_nanos(5);
  EXPECT_THAT(Refused(req), HasSubstr("caller_clock.offset: malformed duration"));
  // Nothing went out.
  EXPECT_TRUE(peers_.sent().empty());

  // The bounds themselves are accepted.
  *measured->mutable_offset() = Dur(kMaxCallerClockOffset);
  *measured->mutable_round_trip() = Dur(absl::Minutes(1));
  EXPECT_TRUE(core_->StartTrace(req, std::make_shared<RecordingObserver>()).ok());
}

TEST_F(TraceTest, DefaultsWithoutStartTimeSkewOrCallerTime) {
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

TEST_F(TraceTest, AZeroSkewIsSentAsOneNanosecond) {
  Attach(1, 100, "42");
  v1::TraceRequest req = JobRequest("42", absl::Seconds(1));
  *req.mutable_max_start_skew() = Dur(absl::ZeroDuration());
  ASSERT_TRUE(core_->StartTrace(req, std::make_shared<RecordingObserver>()).ok());
  EXPECT_EQ(StartsTo(1)[0].max_start_skew_ns(), 1) << "0 on the wire means the default";
}

TEST_F(TraceTest, APastStartDoesNotTimeOutEarly) {
  Attach(1, 100, "42");
  v1::TraceRequest req = JobRequest("42", absl::Seconds(2));
  *req.mutable_start_time() = Ts(clock_.Now() - absl::Seconds(30));
  // Within the skew allowed: past it the instant is refused.
  *req.mutable_max_start_skew() = Dur(absl::Minutes(1));
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

TEST_F(TraceTest, RefusesBadInstantsSkewsAndSteps) {
  Attach(1, 100, "42");
  const absl::Time now = clock_.Now();
  v1::TraceRequest req = JobRequest("42", absl::Seconds(1));
  *req.mutable_start_time() = Ts(now + absl::Hours(1) + absl::Nanoseconds(1));
  EXPECT_THAT(Refused(req), HasSubstr("ahead of this daemon's clock, more than 1h"));
  req.mutable_start_time()->set_nanos(-1);
  EXPECT_THAT(Refused(req), HasSubstr("start_time is not a valid instant"));
  *req.mutable_start_time() = Ts(absl::UnixEpoch() - absl::Seconds(1));
  EXPECT_THAT(Refused(req), HasSubstr("start_time is not a valid instant"));
  // Further in the past than the skew allowed (default 50ms, or the
  // request's): no process could open on time.
  *req.mutable_start_time() = Ts(absl::UnixEpoch() + absl::Seconds(1));
  EXPECT_THAT(Refused(req), HasSubstr("in the past of this daemon's clock, more than the max "
                                      "start skew 50ms"));
  *req.mutable_start_time() = Ts(now - absl::Milliseconds(50) - absl::Nanoseconds(1));
  EXPECT_THAT(Refused(req), HasSubstr("start_time is 50.000001ms in the past of this daemon's "
                                      "clock, more than the max start skew 50ms"));
  *req.mutable_start_time() = Ts(now - absl::Seconds(3));
  *req.mutable_max_start_skew() = Dur(absl::Seconds(2));
  EXPECT_THAT(Refused(req), HasSubstr("start_time is 3s in the past of this daemon's clock, more "
                                      "than the max start skew 2s"));
  req.clear_max_start_skew();
  req.clear_start_time();

  *req.mutable_max_start_skew() = Dur(absl::Milliseconds(-1));
  EXPECT_EQ(Refused(req), "max_start_skew -1ms is not between 0 and 1h");
  *req.mutable_max_start_skew() = Dur(absl::Hours(1) + absl::Seconds(1));
  EXPECT_EQ(Refused(req), "max_start_skew 1h1s is not between 0 and 1h");
  req.clear_max_start_skew();

  req.mutable_caller_time()->set_nanos(1'000'000'000);
  EXPECT_THAT(Refused(req), HasSubstr("caller_time is not a valid instant"));
  req.clear_caller_time();

  req.set_iterations(1'000'001);
  EXPECT_EQ(Refused(req), "iterations 1000001 exceeds the maximum of 1000000");
  req.set_iterations(0);
  req.set_start_step(5);
  EXPECT_EQ(Refused(req), "start_step needs iterations (an iteration window)");
  req.set_iterations(1);
  req.set_start_step(uint64_t{1} << 63);
  EXPECT_THAT(Refused(req), HasSubstr("start_step 9223372036854775808 exceeds the maximum"));
  EXPECT_TRUE(peers_.sent().empty());

  // Exactly an hour ahead is accepted.
  req = JobRequest("42", absl::Seconds(1));
  *req.mutable_start_time() = Ts(now + absl::Hours(1));
  *req.mutable_max_start_skew() = Dur(absl::Hours(1));
  EXPECT_TRUE(core_->StartTrace(req, std::make_shared<RecordingObserver>()).ok());
}

TEST_F(TraceTest, AStartInstantTheSkewInThePastIsAccepted) {
  Attach(1, 100, "42");
  v1::TraceRequest req = JobRequest("42", absl::Seconds(1));
  const absl::Time start = clock_.Now() - absl::Milliseconds(50);
  *req.mutable_start_time() = Ts(start);
  ASSERT_TRUE(core_->StartTrace(req, std::make_shared<RecordingObserver>()).ok());
  ASSERT_EQ(StartsTo(1).size(), 1u);
  EXPECT_EQ(StartsTo(1)[0].start_time_unix_ns(), absl::ToUnixNanos(start));
}

TEST_F(TraceTest, ResultsCarryTheStartSkewAndALateStart) {
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

TEST_F(TraceTest, IterationWindowPicksTheStartStepFromTheSelectedProcesses) {
  const absl::Time now = clock_.Now();
  AttachStepping(1, 100, "42", 0, StepsAt(10, now, absl::Milliseconds(100)));
  AttachStepping(2, 101, "42", 1, StepsAt(37, now, absl::Milliseconds(100)));
  Attach(3, 102, "42", 2);                                                      // shares no counter
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
    const v1::ipc::StartCapture s = StartsTo(peer)[0];
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

TEST_F(TraceTest, IterationWindowRoundsUpOrTakesTheRequestedStep) {
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
  core_->CancelTrace(*id, {});
  RunAll();

  peers_.Clear();
  steps->current_step = 1290;
  ASSERT_TRUE(core_->StartTrace(req, std::make_shared<RecordingObserver>()).ok());
  EXPECT_EQ(StartsTo(1)[0].start_step(), 1400u);
  core_->CancelTrace(StartsTo(1)[0].trace_id(), {});
  RunAll();

  peers_.Clear();
  req.set_start_step(7);
  ASSERT_TRUE(core_->StartTrace(req, std::make_shared<RecordingObserver>()).ok());
  EXPECT_EQ(StartsTo(1)[0].start_step(), 7u) << "the caller's step (a fleet-wide choice) wins";
  core_->CancelTrace(StartsTo(1)[0].trace_id(), {});
  RunAll();

  // Nobody has a step yet: m = -1.
  peers_.Clear();
  steps->has_step = false;
  req.clear_start_step();
  ASSERT_TRUE(core_->StartTrace(req, std::make_shared<RecordingObserver>()).ok());
  EXPECT_EQ(StartsTo(1)[0].start_step(), 100u);
}

TEST_F(TraceTest, IterationWindowTimesOutAtTheBoundPlusGrace) {
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

TEST_F(TraceTest, ALibraryWithoutIterationWindowsIsUnavailableForThem) {
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
  loop_.RunUntilIdle();
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

}  // namespace
}  // namespace gpuctl::daemon
