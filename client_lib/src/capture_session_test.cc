// The capture state machine with a fake clock and a recording output: time
// windows (start instant, skew, late start), validation, cancellation.
#include "client_lib/src/capture_session.h"

#include <gtest/gtest.h>

#include <vector>

#include "client_lib/src/capture_session_fakes_for_test.h"
#include "client_lib/src/payload_decoder_for_test.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::client {
namespace {

using testing::FakeClock;
using testing::FakeSource;
using testing::RecordingOutput;
using testing::StatusOf;

constexpr int64_t kMs = 1'000'000;

class CaptureSessionTest : public ::testing::Test {
 protected:
  wire::StartCapture Request(int64_t start_offset_ns, int64_t duration_ns) {
    wire::StartCapture s;
    s.trace_id = "t1";
    s.start_time_unix_ns = clock_.now + start_offset_ns;
    s.duration_ns = duration_ns;
    s.max_buffer_bytes = 1000;
    return s;
  }
  FakeClock clock_;
  RecordingOutput out_;
  FakeSource source_;
  AnnotationState state_;
  CaptureSession session_{&clock_, &state_, {&source_}, &out_};
};

TEST_F(CaptureSessionTest, WaitsForTheStartThenClosesAtTheEnd) {
  const wire::StartCapture request = Request(5'000'001, 10'000'000);
  ASSERT_TRUE(session_.OnStartCapture(request));
  EXPECT_TRUE(out_.started.empty());
  // Armed at once (the instant is less than kArmLeadNs away); the next
  // deadline is the instant itself, to the nanosecond.
  EXPECT_EQ(source_.started_at, request.start_time_unix_ns);
  EXPECT_EQ(session_.DeadlineNs(), request.start_time_unix_ns);
  EXPECT_EQ(source_.request.max_buffer_bytes, 1000u);
  clock_.now = request.start_time_unix_ns - 1;
  ASSERT_TRUE(session_.OnTimer());
  EXPECT_TRUE(out_.started.empty());
  clock_.now = request.start_time_unix_ns;
  ASSERT_TRUE(session_.OnTimer());
  ASSERT_EQ(out_.started.size(), 1u);
  EXPECT_EQ(out_.started[0].opened_at_unix_ns, clock_.now);
  EXPECT_FALSE(out_.started[0].late_start);
  EXPECT_EQ(out_.started[0].first_step, 0u);
  EXPECT_EQ(session_.DeadlineNs(), request.start_time_unix_ns + 10'000'000);
  clock_.now += 10'000'000;
  ASSERT_TRUE(session_.OnTimer());
  ASSERT_EQ(out_.results.size(), 1u);
  const wire::CaptureResult& r = out_.results[0];
  EXPECT_EQ(r.status, static_cast<int32_t>(wire::CaptureStatus::kOk));
  EXPECT_EQ(r.event_count, 1u);
  EXPECT_EQ(r.dropped_events, 3u);
  EXPECT_EQ(r.window_end_unix_ns - r.window_start_unix_ns, 10'000'000);
  std::optional<testing::DecodedPayload> p = testing::DecodePayload(out_.payloads[0]);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->dropped_events, 3u);
  EXPECT_FALSE(r.late_start);
  EXPECT_TRUE(session_.idle());
  EXPECT_EQ(session_.DeadlineNs(), std::nullopt);
}

TEST_F(CaptureSessionTest, ArmedAheadOfTheInstantTheWindowOpensThereHoweverLateTheAgentRuns) {
  const wire::StartCapture request = Request(500 * kMs, 100 * kMs);
  const int64_t start = request.start_time_unix_ns;
  ASSERT_TRUE(session_.OnStartCapture(request));
  EXPECT_EQ(session_.DeadlineNs(), start - CaptureSession::kArmLeadNs);
  clock_.now = start - CaptureSession::kArmLeadNs - 1;
  ASSERT_TRUE(session_.OnTimer());
  EXPECT_EQ(source_.started_at, 0) << "not armed yet";
  clock_.now = start - CaptureSession::kArmLeadNs;
  ASSERT_TRUE(session_.OnTimer());
  EXPECT_EQ(source_.started_at, start) << "recording, clipped at the instant";
  EXPECT_TRUE(out_.started.empty()) << "armed is not open";
  EXPECT_EQ(session_.DeadlineNs(), start);
  clock_.now = start + 7 * kMs;  // the agent thread got a CPU late
  ASSERT_TRUE(session_.OnTimer());
  ASSERT_EQ(out_.started.size(), 1u);
  EXPECT_EQ(out_.started[0].opened_at_unix_ns, start);
  EXPECT_FALSE(out_.started[0].late_start);
  EXPECT_EQ(session_.DeadlineNs(), start + 100 * kMs);
  clock_.now = start + 100 * kMs;
  ASSERT_TRUE(session_.OnTimer());
  ASSERT_EQ(out_.results.size(), 1u);
  EXPECT_EQ(out_.results[0].window_start_unix_ns, start);
  EXPECT_EQ(out_.results[0].window_end_unix_ns, start + 100 * kMs);
  EXPECT_EQ(source_.stopped_at, start + 100 * kMs);
}

TEST_F(CaptureSessionTest, CancelledWhileArmedTheSourcesAreAbortedAndNothingOpens) {
  const wire::StartCapture request = Request(10 * kMs, 100 * kMs);
  ASSERT_TRUE(session_.OnStartCapture(request));
  ASSERT_EQ(source_.started_at, request.start_time_unix_ns);
  wire::CancelCapture cancel;
  cancel.trace_id = "t1";
  cancel.reason = "user";
  ASSERT_TRUE(session_.OnCancelCapture(cancel));
  EXPECT_EQ(source_.aborts, 1);
  EXPECT_TRUE(out_.started.empty());
  EXPECT_TRUE(session_.idle());
  EXPECT_EQ(session_.DeadlineNs(), std::nullopt);
  // The next request arms afresh.
  clock_.now += kMs;
  ASSERT_TRUE(session_.OnStartCapture(Request(500 * kMs, kMs)));
  EXPECT_EQ(session_.DeadlineNs(), clock_.now + 500 * kMs - CaptureSession::kArmLeadNs);
}

TEST_F(CaptureSessionTest, OpenedLateWithinTheSkewTheWindowStillEndsWithEveryoneElses) {
  // The request arrives after its instant (a stopped process): too late to
  // arm, the window opens when handled.
  const wire::StartCapture request = Request(-30 * kMs, 100 * kMs);  // default skew: 50ms
  ASSERT_TRUE(session_.OnStartCapture(request));
  ASSERT_EQ(out_.started.size(), 1u);
  EXPECT_FALSE(out_.started[0].late_start);
  EXPECT_EQ(out_.started[0].opened_at_unix_ns, clock_.now);
  EXPECT_EQ(source_.started_at, clock_.now);
  const int64_t end = request.start_time_unix_ns + 100 * kMs;
  EXPECT_EQ(session_.DeadlineNs(), end);
  clock_.now = end - 1;
  ASSERT_TRUE(session_.OnTimer());
  EXPECT_TRUE(out_.results.empty());
  clock_.now = end;
  ASSERT_TRUE(session_.OnTimer());
  ASSERT_EQ(out_.results.size(), 1u);
  EXPECT_EQ(out_.results[0].window_start_unix_ns, request.start_time_unix_ns + 30 * kMs);
  EXPECT_EQ(out_.results[0].window_end_unix_ns, end);
  EXPECT_FALSE(out_.results[0].late_start);
  EXPECT_EQ(out_.results[0].message, "");
}

TEST_F(CaptureSessionTest, OpenedBeyondTheSkewTheWindowRunsItsFullDurationAndSaysSo) {
  wire::StartCapture request = Request(0, 500 * kMs);
  request.max_start_skew_ns = 20 * kMs;
  clock_.now += 300 * kMs;  // the request arrives late (a stopped process)
  ASSERT_TRUE(session_.OnStartCapture(request));
  ASSERT_EQ(out_.started.size(), 1u);  // at once
  EXPECT_TRUE(out_.started[0].late_start);
  EXPECT_EQ(out_.started[0].opened_at_unix_ns, clock_.now);
  const int64_t opened = clock_.now;
  EXPECT_EQ(session_.DeadlineNs(), opened + 500 * kMs);
  clock_.now = opened + 500 * kMs;
  ASSERT_TRUE(session_.OnTimer());
  ASSERT_EQ(out_.results.size(), 1u);
  const wire::CaptureResult& r = out_.results[0];
  EXPECT_EQ(StatusOf(r), wire::CaptureStatus::kOk);
  EXPECT_TRUE(r.late_start);
  EXPECT_EQ(r.window_end_unix_ns - r.window_start_unix_ns, 500 * kMs);
  EXPECT_EQ(r.message,
            "opened 300ms after the start instant, beyond the max start skew 20ms: the window "
            "ran 500ms from its opening");
}

TEST_F(CaptureSessionTest, StartInThePastWithinTheSkewOpensAtOnceAndEndsOnSchedule) {
  const wire::StartCapture request = Request(-10 * kMs, 100 * kMs);
  ASSERT_TRUE(session_.OnStartCapture(request));
  ASSERT_EQ(out_.started.size(), 1u);
  EXPECT_FALSE(out_.started[0].late_start);
  EXPECT_EQ(session_.DeadlineNs(), request.start_time_unix_ns + 100 * kMs);
}

TEST_F(CaptureSessionTest, MaxStartSkewIsValidated) {
  wire::StartCapture request = Request(0, kMs);
  request.max_start_skew_ns = -1;
  ASSERT_TRUE(session_.OnStartCapture(request));
  request.max_start_skew_ns = CaptureSession::kMaxStartSkewNs + 1;
  ASSERT_TRUE(session_.OnStartCapture(request));
  ASSERT_EQ(out_.results.size(), 2u);
  for (const wire::CaptureResult& r : out_.results) {
    EXPECT_EQ(StatusOf(r), wire::CaptureStatus::kRejected);
    EXPECT_NE(r.message.find("max_start_skew_ns"), std::string::npos) << r.message;
  }
  EXPECT_EQ(source_.prepares, 0);
  EXPECT_TRUE(session_.idle());
}

TEST(DurationTextTest, PicksTheLargestUnitAndTrimsZeros) {
  EXPECT_EQ(DurationText(0), "0ns");
  EXPECT_EQ(DurationText(999), "999ns");
  EXPECT_EQ(DurationText(1'500), "1.5us");
  EXPECT_EQ(DurationText(250'000'000), "250ms");
  EXPECT_EQ(DurationText(1'234'567), "1.235ms");
  EXPECT_EQ(DurationText(1'500'000'000), "1.5s");
  EXPECT_EQ(DurationText(3'600'000'000'000), "3600s");
  EXPECT_EQ(DurationText(-20'000'000), "-20ms");
}

TEST_F(CaptureSessionTest, DaemonPayloadLimitCapsTheBuffer) {
  session_.set_max_payload_bytes(500);
  ASSERT_TRUE(session_.OnStartCapture(Request(0, 1)));
  EXPECT_EQ(source_.request.max_buffer_bytes, 500u);
}

TEST_F(CaptureSessionTest, PrepareFailureIsReported) {
  source_.prepare_ok = false;
  ASSERT_TRUE(session_.OnStartCapture(Request(0, 1)));
  ASSERT_EQ(out_.results.size(), 1u);
  EXPECT_EQ(out_.results[0].status, static_cast<int32_t>(wire::CaptureStatus::kFailed));
  EXPECT_NE(out_.results[0].message.find("no device"), std::string::npos);
  EXPECT_TRUE(session_.idle());
}

TEST_F(CaptureSessionTest, PrepareStatusIsPassedThrough) {
  source_.prepare_ok = false;
  source_.prepare_status = wire::CaptureStatus::kBusy;
  ASSERT_TRUE(session_.OnStartCapture(Request(0, 1)));
  ASSERT_EQ(out_.results.size(), 1u);
  EXPECT_EQ(out_.results[0].status, static_cast<int32_t>(wire::CaptureStatus::kBusy));
  EXPECT_EQ(out_.results[0].message, "no device");
}

TEST_F(CaptureSessionTest, ActivitiesAreParsedAndUnknownOnesRejected) {
  wire::StartCapture request = Request(0, 1'000'000);
  ASSERT_TRUE(session_.OnStartCapture(request));
  EXPECT_EQ(source_.request.activities, records::kDefaultActivities);
  session_.Abort();
  request.activities = {"kernel", "memcpy"};
  request.activity_buffer_bytes = 1 << 20;
  ASSERT_TRUE(session_.OnStartCapture(request));
  EXPECT_EQ(source_.request.activities, records::kActivityKernel | records::kActivityMemcpy);
  EXPECT_EQ(source_.request.activity_buffer_bytes, 1u << 20);
  session_.Abort();
  request.activities = {"kernel", "tensor"};
  ASSERT_TRUE(session_.OnStartCapture(request));
  ASSERT_EQ(out_.results.size(), 1u);
  EXPECT_EQ(out_.results[0].status, static_cast<int32_t>(wire::CaptureStatus::kRejected));
  EXPECT_NE(out_.results[0].message.find("\"tensor\""), std::string::npos);
}

TEST_F(CaptureSessionTest, SourceMessageAndHostOnlyReachTheResult) {
  source_.collect_message = "host-only trace: no CUDA library is loaded in this process";
  source_.collect_host_only = true;
  ASSERT_TRUE(session_.OnStartCapture(Request(0, 1)));
  clock_.now += 1;
  ASSERT_TRUE(session_.OnTimer());
  ASSERT_EQ(out_.results.size(), 1u);
  EXPECT_EQ(out_.results[0].status, static_cast<int32_t>(wire::CaptureStatus::kOk));
  EXPECT_TRUE(out_.results[0].host_only);
  EXPECT_EQ(out_.results[0].message, source_.collect_message);
  EXPECT_EQ(out_.results[0].cupti_dropped_records, 2u);
}

TEST_F(CaptureSessionTest, CancelOfAnotherTraceIsIgnored) {
  ASSERT_TRUE(session_.OnStartCapture(Request(0, 1'000'000'000)));
  wire::CancelCapture cancel;
  cancel.trace_id = "other";
  ASSERT_TRUE(session_.OnCancelCapture(cancel));
  EXPECT_TRUE(out_.results.empty());
  EXPECT_FALSE(session_.idle());
}

TEST_F(CaptureSessionTest, SendFailureDropsTheCapture) {
  out_.ok = false;
  EXPECT_FALSE(session_.OnStartCapture(Request(0, 1'000'000'000)));
  EXPECT_TRUE(session_.idle());
  EXPECT_EQ(source_.aborts, 1);
}

}  // namespace
}  // namespace gpuctl::client
