// The core's use of IngestAdmission: results beyond trace.max_ingest_bytes
// wait for the worker, in order, and a cancelled trace drops them.
#include "daemon/core/testing/trace_test_fixture.h"
#include "daemon/core/trace_session.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

class IngestCapTest : public TraceTest {
 protected:
  void SetUp() override {
    TraceTest::SetUp();
    // Smaller than two payloads together: one converts at a time.
    options_.max_ingest_bytes = 1;
    MakeCore();
    Attach(1, 100, "j", 0);
    Attach(2, 101, "j", 1);
    obs_ = std::make_shared<RecordingObserver>();
    auto id = Trace("j", absl::Seconds(2), obs_);
    ASSERT_TRUE(id.ok()) << id.status();
    id_ = *id;
    loop_.RunUntilIdle();
    start_ = StartsTo(1).at(0).start_time_unix_ns();
  }
  void Deliver(PeerId peer, int pid) {
    v1::ipc::CaptureResult result;
    result.set_trace_id(id_);
    result.set_window_start_unix_ns(start_);
    result.set_window_end_unix_ns(start_ + 2'000'000'000);
    SendCaptureResult(peer, result, WindowPayload(pid, start_, start_ + 2'000'000'000));
  }
  std::shared_ptr<RecordingObserver> obs_;
  std::string id_;
  int64_t start_ = 0;
};

TEST_F(IngestCapTest, SecondResultWaitsUntilTheFirstIsConverted) {
  Deliver(1, 100);
  Deliver(2, 101);
  ASSERT_TRUE(worker_.RunOne());
  EXPECT_FALSE(worker_.RunOne()) << "the second payload started beyond the cap";
  EXPECT_EQ(obs_->ResultFor(100), nullptr) << "reported before the loop ran";
  loop_.RunUntilIdle();  // the first is reported and releases its bytes
  ASSERT_NE(obs_->ResultFor(100), nullptr);
  EXPECT_EQ(obs_->ResultFor(100)->status(), v1::CAPTURE_STATUS_OK);
  EXPECT_EQ(obs_->ResultFor(101), nullptr);
  RunAll();
  ASSERT_NE(obs_->ResultFor(101), nullptr);
  EXPECT_EQ(obs_->ResultFor(101)->status(), v1::CAPTURE_STATUS_OK);
  EXPECT_TRUE(obs_->done);
}

TEST_F(IngestCapTest, WaitingResultDoesNotTimeOut) {
  Deliver(1, 100);
  Deliver(2, 101);
  loop_.AdvanceBy(absl::Minutes(5));
  EXPECT_EQ(obs_->ResultFor(101), nullptr) << "a result waiting for capacity timed out";
  RunAll();
  ASSERT_NE(obs_->ResultFor(101), nullptr);
  EXPECT_EQ(obs_->ResultFor(101)->status(), v1::CAPTURE_STATUS_OK);
}

TEST_F(IngestCapTest, WaitingAndConvertingResultsRepeatTheirProgress) {
  Deliver(1, 100);
  Deliver(2, 101);
  ASSERT_TRUE(worker_.RunOne());  // 100 converted; its report not yet run
  auto processing = [this](int pid) {
    std::vector<std::string> messages;
    for (const v1::TraceEvent& e : obs_->events) {
      if (e.has_progress() && e.progress().pid() == pid &&
          e.progress().phase() == v1::PROCESS_PHASE_PROCESSING) {
        messages.push_back(e.progress().message());
      }
    }
    return messages;
  };
  EXPECT_EQ(processing(101), std::vector<std::string>{""});
  loop_.AdvanceBy(kIngestProgressInterval);
  // 100's report ran first (it was posted): 101 converts now.
  ASSERT_NE(obs_->ResultFor(100), nullptr);
  EXPECT_EQ(processing(100).size(), 1u) << "a finished result still reported progress";
  EXPECT_EQ(processing(101), (std::vector<std::string>{"", "converting"}));
  loop_.AdvanceBy(kIngestProgressInterval);
  EXPECT_EQ(processing(101).size(), 3u);
  RunAll();
  ASSERT_NE(obs_->ResultFor(101), nullptr);
  EXPECT_TRUE(obs_->done);
  const size_t events = obs_->events.size();
  loop_.AdvanceBy(10 * kIngestProgressInterval);
  EXPECT_EQ(obs_->events.size(), events) << "progress after the trace completed";
}

TEST_F(IngestCapTest, ResultWaitingForCapacitySaysSo) {
  Deliver(1, 100);
  Deliver(2, 101);
  loop_.AdvanceBy(kIngestProgressInterval);
  std::vector<std::string> seen;
  for (const v1::TraceEvent& e : obs_->events) {
    if (e.has_progress() && e.progress().pid() == 101) seen.push_back(e.progress().message());
  }
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), "waiting for ingest capacity");
  RunAll();
}

TEST_F(IngestCapTest, CancelDropsTheWaitingResult) {
  Deliver(1, 100);
  Deliver(2, 101);
  core_->CancelTrace(id_, {});
  size_t worker_tasks = 0;
  for (size_t n = 1; n > 0;) {
    n = worker_.RunAll();
    worker_tasks += n;
    n += loop_.RunUntilIdle();
  }
  EXPECT_TRUE(obs_->done);
  // The conversion that had started and the manifest; never the waiting one.
  EXPECT_EQ(worker_tasks, 2u);
  EXPECT_EQ(obs_->ResultFor(101)->status(), v1::CAPTURE_STATUS_FAILED);
}

}  // namespace
}  // namespace gpuctl::daemon
