// What the core reports to its CoreMetrics, and its snapshot for gauges.
#include "daemon/core/core_metrics.h"

#include <optional>
#include <utility>
#include <vector>

#include "daemon/core/testing/core_test_fixture.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

struct RecordingMetrics : CoreMetrics {
  void OnHelloAccepted() override { ++accepted; }
  void OnHelloRefused(const absl::Status& status) override { refused.push_back(status.code()); }
  void OnTraceStarted(TraceTrigger trigger) override { started.push_back(trigger); }
  void OnTraceDone(TraceTrigger trigger, TraceOutcome outcome) override {
    done.emplace_back(trigger, outcome);
  }
  void OnWindowOpened(absl::Duration latency, std::optional<absl::Duration> skew) override {
    latencies.push_back(latency);
    skews.push_back(skew);
  }
  void OnProcessResult(const v1::ProcessResult& result,
                       std::optional<absl::Duration> conversion) override {
    results.push_back(result.status());
    conversions.push_back(conversion);
  }

  int accepted = 0;
  std::vector<absl::StatusCode> refused;
  std::vector<TraceTrigger> started;
  std::vector<std::pair<TraceTrigger, TraceOutcome>> done;
  std::vector<absl::Duration> latencies;
  std::vector<std::optional<absl::Duration>> skews;
  std::vector<v1::CaptureStatus> results;
  std::vector<std::optional<absl::Duration>> conversions;
};

class CoreMetricsTest : public DaemonCoreTest {
 protected:
  void SetUp() override {
    DaemonCoreTest::SetUp();
    metrics_ = &recorded_;
    MakeCore();
  }
  uint64_t AttachedWorkers() {
    uint64_t workers = 0;
    for (const CoreSnapshot::AttachedGroup& group : core_->Snapshot().attached) {
      // These tests attach library processes only: the kineto groups stay 0.
      if (group.kind == "kineto") {
        EXPECT_EQ(group.count, 0u);
      }
      if (group.kind == "library" && group.role == v1::PROCESS_ROLE_WORKER) workers = group.count;
    }
    return workers;
  }
  RecordingMetrics recorded_;
};

TEST_F(CoreMetricsTest, RegistrationsAndRefusalsFromTheCoreAndTheIpcServer) {
  Attach(1, 100, "42", 0);
  v1::ipc::Hello other_major = MakeHello(101, "42", 1);
  other_major.set_protocol_major(99);
  EXPECT_FALSE(core_->OnPeerHello(2, {101, 1000, 1000}, other_major, nullptr).ok());
  core_->OnHelloRefused({102, 1000, 1000}, MakeHello(102, "42"),
                        absl::ResourceExhaustedError("too many Hellos"));
  EXPECT_EQ(recorded_.accepted, 1);
  EXPECT_EQ(recorded_.refused,
            (std::vector<absl::StatusCode>{absl::StatusCode::kFailedPrecondition,
                                           absl::StatusCode::kResourceExhausted}));
  EXPECT_EQ(AttachedWorkers(), 1u);
}

TEST_F(CoreMetricsTest, ATraceReportsItsWindowItsResultAndItsEnd) {
  Attach(1, 100, "42", 0);
  auto observer = std::make_shared<RecordingObserver>();
  const absl::Time received = clock_.Now();
  absl::StatusOr<std::string> id = Trace("42", absl::Seconds(1), observer);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(recorded_.started, std::vector<TraceTrigger>{TraceTrigger::kOnDemand});
  EXPECT_EQ(core_->Snapshot().captures_in_flight, 1u);
  EXPECT_EQ(core_->Snapshot().active_traces, 1u);

  const v1::ipc::StartCapture start = StartsTo(1).at(0);
  const absl::Time instant = absl::FromUnixNanos(start.start_time_unix_ns());
  v1::ipc::CaptureStarted opened;
  opened.set_trace_id(*id);
  opened.set_opened_at_unix_ns(absl::ToUnixNanos(instant + absl::Milliseconds(3)));
  core_->OnCaptureStarted(1, opened);
  ASSERT_EQ(recorded_.latencies.size(), 1u);
  EXPECT_EQ(recorded_.latencies[0], instant + absl::Milliseconds(3) - received);
  EXPECT_EQ(recorded_.skews[0], absl::Milliseconds(3));

  SendResult(1, *id, Payload(100, start));
  clock_.Advance(absl::Milliseconds(40));
  RunAll();
  ASSERT_TRUE(observer->done);
  EXPECT_EQ(recorded_.results, std::vector<v1::CaptureStatus>{v1::CAPTURE_STATUS_OK});
  EXPECT_EQ(recorded_.conversions.at(0), absl::Milliseconds(40));
  EXPECT_EQ(recorded_.done, (std::vector<std::pair<TraceTrigger, TraceOutcome>>{
                                {TraceTrigger::kOnDemand, TraceOutcome::kCompleted}}));
  EXPECT_EQ(core_->Snapshot().captures_in_flight, 0u);
  EXPECT_EQ(core_->Snapshot().active_traces, 0u);
}

TEST_F(CoreMetricsTest, ARefusedTraceAndAProcessLostMidCapture) {
  Attach(1, 100, "42", 0);
  auto observer = std::make_shared<RecordingObserver>();
  EXPECT_FALSE(Trace("nobody", absl::Seconds(1), observer).ok());
  EXPECT_TRUE(recorded_.started.empty());
  ASSERT_EQ(recorded_.done.size(), 1u);
  EXPECT_EQ(recorded_.done[0].second, TraceOutcome::kRefused);

  ASSERT_TRUE(Trace("42", absl::Seconds(1), observer).ok());
  core_->OnPeerGone(1, /*clean=*/false, "connection reset");
  RunAll();
  EXPECT_EQ(recorded_.results, std::vector<v1::CaptureStatus>{v1::CAPTURE_STATUS_LOST});
  // Nothing was converted.
  EXPECT_EQ(recorded_.conversions.at(0), std::nullopt);
  EXPECT_EQ(recorded_.done.back().second, TraceOutcome::kCompleted);
  EXPECT_EQ(AttachedWorkers(), 0u);
}

TEST_F(CoreMetricsTest, CancelledTraces) {
  Attach(1, 100, "42", 0);
  auto observer = std::make_shared<RecordingObserver>();
  absl::StatusOr<std::string> id = Trace("42", absl::Seconds(5), observer);
  ASSERT_TRUE(id.ok());
  core_->CancelTrace(*id, v1::TraceCancellation());
  RunAll();
  ASSERT_TRUE(observer->done);
  EXPECT_EQ(recorded_.done.back(),
            std::make_pair(TraceTrigger::kOnDemand, TraceOutcome::kCancelled));
}

TEST_F(CoreMetricsTest, TheSnapshotCountsIngestConvertingAndWaitingUnderTheCap) {
  options_.max_ingest_bytes = 100;
  MakeCore();
  Attach(1, 100, "42", 0);
  Attach(2, 101, "42", 1);
  auto observer = std::make_shared<RecordingObserver>();
  absl::StatusOr<std::string> id = Trace("42", absl::Seconds(1), observer);
  ASSERT_TRUE(id.ok());
  std::vector<uint8_t> first = Payload(100, StartsTo(1).at(0));
  std::vector<uint8_t> second = Payload(101, StartsTo(2).at(0));
  const uint64_t first_size = first.size(), second_size = second.size();
  ASSERT_GT(first_size, 100u);
  SendResult(1, *id, std::move(first));
  SendResult(2, *id, std::move(second));
  // The first runs alone (larger than the cap); the second waits for it.
  CoreSnapshot snapshot = core_->Snapshot();
  EXPECT_EQ(snapshot.ingest_max_bytes, 100u);
  EXPECT_EQ(snapshot.ingest_running_bytes, first_size);
  EXPECT_EQ(snapshot.ingest_waiting_bytes, second_size);
  EXPECT_EQ(snapshot.ingest_waiting_results, 1u);
  EXPECT_EQ(snapshot.captures_in_flight, 0u);
  RunAll();
  snapshot = core_->Snapshot();
  EXPECT_EQ(snapshot.ingest_running_bytes, 0u);
  EXPECT_EQ(snapshot.ingest_waiting_results, 0u);
  EXPECT_EQ(recorded_.results.size(), 2u);
}

}  // namespace
}  // namespace gpuctl::daemon
