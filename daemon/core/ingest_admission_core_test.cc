// The core's use of IngestAdmission: results beyond trace.max_ingest_bytes
// wait for the worker, in order, and a cancelled trace drops them. The
// budget is the core's alone: the IPC server reserves inline payloads in it
// (DaemonCore::ingest) and the core converts them under that entry.
#include "daemon/core/testing/trace_test_fixture.h"
#include "daemon/core/testing/vector_payload.h"
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
  // As the IPC server delivers an inline payload it reserved as `entry`.
  void DeliverAdmitted(PeerId peer, int pid, IngestAdmission::Id entry) {
    v1::ipc::CaptureResult result;
    result.set_trace_id(id_);
    result.set_window_start_unix_ns(start_);
    result.set_window_end_unix_ns(start_ + 2'000'000'000);
    result.set_status(v1::CAPTURE_STATUS_OK);
    result.set_transport(v1::ipc::PAYLOAD_TRANSPORT_INLINE);
    std::vector<uint8_t> bytes = WindowPayload(pid, start_, start_ + 2'000'000'000);
    result.set_payload_size(bytes.size());
    core_->OnCaptureResult(peer, result,
                           std::make_unique<testing::VectorPayload>(std::move(bytes), entry));
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

TEST_F(IngestCapTest, AnInlinePayloadConvertsUnderTheEntryItWasReadIn) {
  // The IPC server reserved the inline payload's bytes before reading it.
  IngestAdmission& budget = core_->ingest();
  bool admitted = false;
  const IngestAdmission::Id entry =
      budget.Submit(1000, [&](IngestAdmission::Id) { admitted = true; });
  ASSERT_TRUE(admitted);
  DeliverAdmitted(1, 100, entry);
  // Converted at once, counted once: no second entry, nothing queued.
  EXPECT_EQ(budget.running_count(), 1u);
  EXPECT_EQ(budget.waiting_count(), 0u);
  EXPECT_TRUE(budget.IsRunning(entry));
  // A mapped payload of the same trace queues behind it in the same budget.
  Deliver(2, 101);
  EXPECT_EQ(budget.waiting_count(), 1u);
  ASSERT_TRUE(worker_.RunOne());
  EXPECT_FALSE(worker_.RunOne()) << "the mapped payload started beyond the cap";
  loop_.RunUntilIdle();  // the inline one is reported; its entry goes
  EXPECT_FALSE(budget.IsRunning(entry));
  ASSERT_NE(obs_->ResultFor(100), nullptr);
  EXPECT_EQ(obs_->ResultFor(100)->status(), v1::CAPTURE_STATUS_OK);
  RunAll();
  ASSERT_NE(obs_->ResultFor(101), nullptr);
  EXPECT_EQ(obs_->ResultFor(101)->status(), v1::CAPTURE_STATUS_OK);
  EXPECT_EQ(budget.running_bytes(), 0u);
}

TEST_F(IngestCapTest, AMappedPayloadWaitsWhileAnInlineOneIsStillArriving) {
  IngestAdmission& budget = core_->ingest();
  const IngestAdmission::Id receiving = budget.Submit(1000, [](IngestAdmission::Id) {});
  Deliver(2, 101);
  EXPECT_FALSE(worker_.RunOne()) << "converted beside an inline payload holding the cap";
  budget.Release(receiving);  // the inline payload was dropped
  RunAll();
  ASSERT_NE(obs_->ResultFor(101), nullptr);
  EXPECT_EQ(obs_->ResultFor(101)->status(), v1::CAPTURE_STATUS_OK);
}

}  // namespace
}  // namespace gpuctl::daemon
