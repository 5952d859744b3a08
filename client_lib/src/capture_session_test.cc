// The capture state machine with a fake clock and a recording output.
#include "client_lib/src/capture_session.h"

#include <gtest/gtest.h>

#include <vector>

#include "client_lib/src/payload_decoder_for_test.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::client {
namespace {

class FakeClock final : public Clock {
 public:
  int64_t RealtimeNs() override { return now; }
  int64_t MonotonicNs() override { return now; }
  int64_t now = 1'000'000'000'000;
};

class RecordingOutput final : public CaptureOutput {
 public:
  bool SendStarted(const wire::CaptureStarted& s) override {
    started.push_back(s);
    return ok;
  }
  bool SendResult(const wire::CaptureResult& r, const std::string* payload) override {
    results.push_back(r);
    payloads.push_back(payload != nullptr ? *payload : "");
    return ok;
  }
  bool ok = true;
  std::vector<wire::CaptureStarted> started;
  std::vector<wire::CaptureResult> results;
  std::vector<std::string> payloads;
};

class FakeSource final : public ActivitySource {
 public:
  bool Prepare(const CaptureRequest& r, PrepareError* error) override {
    request = r;
    error->status = prepare_status;
    error->message = "no device";
    return prepare_ok;
  }
  void Start(int64_t ts) override { started_at = ts; }
  void Stop(int64_t ts) override { stopped_at = ts; }
  CollectStats Collect(RecordWriter& w) override {
    w.AddStep(1, started_at, 5);
    CollectStats stats;
    stats.dropped_events = 3;
    stats.cupti_dropped = 2;
    stats.host_only = collect_host_only;
    stats.message = collect_message;
    return stats;
  }
  void Abort() override { ++aborts; }
  bool prepare_ok = true;
  wire::CaptureStatus prepare_status = wire::CaptureStatus::kFailed;
  bool collect_host_only = false;
  std::string collect_message;
  CaptureRequest request;
  int64_t started_at = 0, stopped_at = 0;
  int aborts = 0;
};

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
  CaptureSession session_{&clock_, {&source_}, &out_};
};

TEST_F(CaptureSessionTest, WaitsForTheStartThenClosesAtTheEnd) {
  ASSERT_TRUE(session_.OnStartCapture(Request(5'000'000, 10'000'000)));
  EXPECT_TRUE(out_.started.empty());
  EXPECT_EQ(session_.TimeoutMs(), 5);
  EXPECT_EQ(source_.request.max_buffer_bytes, 1000u);
  clock_.now += 5'000'000;
  ASSERT_TRUE(session_.OnTimer());
  ASSERT_EQ(out_.started.size(), 1u);
  EXPECT_EQ(out_.started[0].opened_at_unix_ns, clock_.now);
  EXPECT_EQ(session_.TimeoutMs(), 10);
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
  EXPECT_TRUE(session_.idle());
  EXPECT_EQ(session_.TimeoutMs(), -1);
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
