// Busy, timed-out, lost, exited, rejected and cancelled captures.
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "daemon/common/trace_id.h"
#include "daemon/core/testing/core_test_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;

TEST_F(DaemonCoreTest, BusyProcessGetsBusyWhileOthersProceed) {
  Attach(1, 100, "42");
  auto first = std::make_shared<RecordingObserver>();
  auto first_id = Trace("", absl::Seconds(5), first, {100});
  ASSERT_TRUE(first_id.ok());
  Attach(2, 101, "42");
  peers_.Clear();
  auto second = std::make_shared<RecordingObserver>();
  auto id = Trace("42", absl::Seconds(1), second);
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(StartsTo(1).empty());
  ASSERT_EQ(StartsTo(2).size(), 1u);
  const v1::ProcessResult* busy = second->ResultFor(100);
  ASSERT_NE(busy, nullptr);
  EXPECT_EQ(busy->status(), v1::CAPTURE_STATUS_BUSY);
  EXPECT_EQ(busy->message(), "already capturing trace " + *first_id);
  EXPECT_FALSE(second->done);

  SendResult(2, *id, Payload(101, StartsTo(2)[0]));
  RunAll();
  ASSERT_TRUE(second->done);
  EXPECT_EQ(second->ResultFor(101)->status(), v1::CAPTURE_STATUS_OK);
  EXPECT_FALSE(first->done);  // the first trace is unaffected
  EXPECT_EQ(core_->ListProcesses({})->processes(0).current_trace_id(), *first_id);
}

TEST_F(DaemonCoreTest, TimesOutProcessesWithoutResult) {
  options_.result_grace = absl::Seconds(10);
  MakeCore();
  Attach(1, 100, "42");
  Attach(2, 101, "42");
  auto obs = std::make_shared<RecordingObserver>();
  auto id = Trace("42", absl::Seconds(2), obs);
  ASSERT_TRUE(id.ok());
  SendResult(1, *id, Payload(100, StartsTo(1)[0]));
  RunAll();
  EXPECT_FALSE(obs->done);
  loop_.AdvanceBy(absl::Seconds(3));
  EXPECT_EQ(core_->ListProcesses({})->processes(1).capture_state(), v1::CAPTURE_STATE_COLLECTING);
  loop_.AdvanceBy(absl::Milliseconds(100) + absl::Seconds(9) - absl::Nanoseconds(1));
  EXPECT_EQ(obs->ResultFor(101), nullptr);
  loop_.AdvanceBy(absl::Nanoseconds(1));
  const v1::ProcessResult* r = obs->ResultFor(101);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status(), v1::CAPTURE_STATUS_TIMED_OUT);
  EXPECT_THAT(r->message(), HasSubstr("no result within"));
  ASSERT_EQ(CancelsTo(2).size(), 1u);
  EXPECT_TRUE(CancelsTo(1).empty());
  RunAll();
  ASSERT_TRUE(obs->done);
  EXPECT_TRUE(obs->final_status.ok());
  EXPECT_EQ(obs->ResultFor(100)->status(), v1::CAPTURE_STATUS_OK);
  auto manifest = store_->GetManifest(*id);
  ASSERT_TRUE(manifest.ok());
  EXPECT_EQ(manifest->results(1).status(), v1::CAPTURE_STATUS_TIMED_OUT);
  // A late result is ignored.
  SendResult(2, *id, Payload(101, StartsTo(2)[0]));
  RunAll();
  EXPECT_EQ(obs->Results().size(), 2u);
}

TEST_F(DaemonCoreTest, LostAndExitedProcesses) {
  Attach(1, 100, "42");
  Attach(2, 101, "42");
  Attach(3, 102, "42");
  auto obs = std::make_shared<RecordingObserver>();
  auto id = Trace("42", absl::Seconds(1), obs);
  ASSERT_TRUE(id.ok());
  core_->OnPeerGone(1, /*clean=*/true, "goodbye");
  core_->OnPeerGone(2, /*clean=*/false, "connection reset");
  EXPECT_EQ(obs->ResultFor(100)->status(), v1::CAPTURE_STATUS_EXITED);
  EXPECT_EQ(obs->ResultFor(101)->status(), v1::CAPTURE_STATUS_LOST);
  EXPECT_THAT(obs->ResultFor(101)->message(), HasSubstr("connection reset"));
  EXPECT_EQ(core_->GetStatus().attached_processes(), 1u);
  EXPECT_FALSE(obs->done);
  SendResult(3, *id, Payload(102, StartsTo(3)[0]));
  RunAll();
  ASSERT_TRUE(obs->done);
  EXPECT_EQ(obs->events.back().completed().processes_ok(), 1u);
  EXPECT_EQ(obs->events.back().completed().processes_failed(), 2u);
}

// A process in a container (its own pid namespace, as a DaemonSet's daemon
// sees training pods) is pid 4711 to the daemon and pid 1 to itself: its
// Hello and its trace data say 1, the daemon lists and names it by 4711.
class ContainerProcessTest : public DaemonCoreTest {
 protected:
  // Peer 1, rank 0 of job 42; its /proc status says NSpid 4711 1.
  void AttachContainersProcess() {
    const std::string proc = options_.proc_root + "/4711";
    std::filesystem::create_directories(proc);
    std::ofstream(proc + "/status") << "Name:\tpython\nNSpid:\t4711\t1\nPPid:\t4700\n";
    ASSERT_TRUE(core_->OnPeerHello(1, {4711, 1000, 1000}, MakeHello(1, "42", 0), nullptr).ok());
  }
};

TEST_F(ContainerProcessTest, IsKnownByBothPids) {
  AttachContainersProcess();
  auto obs = std::make_shared<RecordingObserver>();
  auto id = Trace("42", absl::Seconds(1), obs);
  ASSERT_TRUE(id.ok()) << id.status();
  SendResult(1, *id, Payload(1, StartsTo(1)[0]));
  RunAll();
  ASSERT_TRUE(obs->done);
  ASSERT_NE(obs->ResultFor(4711), nullptr);
  EXPECT_EQ(obs->ResultFor(4711)->status(), v1::CAPTURE_STATUS_OK)
      << obs->ResultFor(4711)->message();
  EXPECT_TRUE(store_->Open(*id, "h1-rank0-pid4711.json.gz").ok());
}

// Trace data of the host's pid from a process that calls itself 1 is not
// its own.
TEST_F(ContainerProcessTest, CannotDeliverAnotherPidsData) {
  AttachContainersProcess();
  auto obs = std::make_shared<RecordingObserver>();
  auto id = Trace("42", absl::Seconds(1), obs);
  ASSERT_TRUE(id.ok()) << id.status();
  SendResult(1, *id, Payload(4711, StartsTo(1)[0]));
  RunAll();
  ASSERT_NE(obs->ResultFor(4711), nullptr);
  EXPECT_EQ(obs->ResultFor(4711)->status(), v1::CAPTURE_STATUS_REJECTED);
  EXPECT_THAT(obs->ResultFor(4711)->message(),
              HasSubstr("payload pid 4711 is not the sender's pid 1"));
}

TEST_F(DaemonCoreTest, InvalidPayloadIsRejectedOthersUnaffected) {
  Attach(1, 100, "42");
  Attach(2, 101, "42");
  Attach(3, 102, "42");
  auto obs = std::make_shared<RecordingObserver>();
  auto id = Trace("42", absl::Seconds(1), obs);
  ASSERT_TRUE(id.ok());
  SendResult(1, *id, Payload(999, StartsTo(1)[0]));  // claims another pid
  std::vector<uint8_t> truncated = Payload(101, StartsTo(2)[0]);
  truncated.resize(50);
  SendResult(2, *id, truncated);
  SendResult(3, *id, Payload(102, StartsTo(3)[0]));
  RunAll();
  ASSERT_TRUE(obs->done);
  EXPECT_TRUE(obs->final_status.ok());
  EXPECT_EQ(obs->ResultFor(100)->status(), v1::CAPTURE_STATUS_REJECTED);
  EXPECT_THAT(obs->ResultFor(100)->message(),
              HasSubstr("payload pid 999 is not the sender's pid 100"));
  EXPECT_TRUE(obs->ResultFor(100)->file().empty());
  EXPECT_EQ(obs->ResultFor(101)->status(), v1::CAPTURE_STATUS_REJECTED);
  EXPECT_THAT(obs->ResultFor(101)->message(), HasSubstr("shorter than the 96-byte header"));
  EXPECT_EQ(obs->ResultFor(102)->status(), v1::CAPTURE_STATUS_OK);
  EXPECT_FALSE(store_->Open(*id, "h1-rank-1-pid100.json.gz").ok());
  EXPECT_TRUE(store_->Open(*id, "h1-rank-1-pid102.json.gz").ok());
}

TEST_F(DaemonCoreTest, ProcessStatusAndOversizedPayload) {
  options_.max_payload_bytes = 100;
  MakeCore();
  Attach(1, 100, "42");
  Attach(2, 101, "42");
  Attach(3, 102, "42");
  auto obs = std::make_shared<RecordingObserver>();
  auto id = Trace("42", absl::Seconds(1), obs);
  ASSERT_TRUE(id.ok());
  v1::ipc::CaptureResult unavailable;
  unavailable.set_trace_id(*id);
  unavailable.set_status(v1::CAPTURE_STATUS_UNAVAILABLE);
  unavailable.set_message("CUPTI not found");
  core_->OnCaptureResult(1, unavailable, nullptr);
  SendResult(2, *id, Payload(101, StartsTo(2)[0]));
  v1::ipc::CaptureResult no_payload;
  no_payload.set_trace_id(*id);
  no_payload.set_status(v1::CAPTURE_STATUS_OK);
  core_->OnCaptureResult(3, no_payload, nullptr);
  RunAll();
  ASSERT_TRUE(obs->done);
  EXPECT_EQ(obs->ResultFor(100)->status(), v1::CAPTURE_STATUS_UNAVAILABLE);
  EXPECT_EQ(obs->ResultFor(100)->message(), "CUPTI not found");
  EXPECT_EQ(obs->ResultFor(101)->status(), v1::CAPTURE_STATUS_REJECTED);
  EXPECT_THAT(obs->ResultFor(101)->message(), HasSubstr("exceeds the limit of 100 bytes"));
  EXPECT_EQ(obs->ResultFor(102)->status(), v1::CAPTURE_STATUS_FAILED);
}

TEST_F(DaemonCoreTest, IgnoresResultForAnotherTrace) {
  Attach(1, 100, "42");
  auto obs = std::make_shared<RecordingObserver>();
  auto id = Trace("42", absl::Seconds(1), obs);
  ASSERT_TRUE(id.ok());
  SendResult(1, "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b", Payload(100, StartsTo(1)[0]));
  SendResult(99, *id, Payload(100, StartsTo(1)[0]));  // unknown peer
  RunAll();
  EXPECT_TRUE(obs->Results().empty());
  EXPECT_FALSE(obs->done);
}

TEST_F(DaemonCoreTest, CancelSendsCancelAndFinishes) {
  Attach(1, 100, "42");
  Attach(2, 101, "42");
  auto obs = std::make_shared<RecordingObserver>();
  auto id = Trace("42", absl::Seconds(5), obs);
  ASSERT_TRUE(id.ok());
  SendResult(1, *id, Payload(100, StartsTo(1)[0]));  // processing when cancelled
  clock_.Advance(absl::Seconds(2));
  v1::TraceCancellation why;
  why.set_reason("the caller cancelled its Trace call");
  why.set_cancelled_by("ipv4:10.0.0.5:51234");
  core_->CancelTrace(*id, why);
  ASSERT_EQ(CancelsTo(2).size(), 1u);
  EXPECT_EQ(CancelsTo(2)[0].trace_id(), *id);
  EXPECT_TRUE(CancelsTo(1).empty());
  RunAll();
  ASSERT_TRUE(obs->done);
  EXPECT_EQ(obs->final_status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(obs->ResultFor(101)->status(), v1::CAPTURE_STATUS_FAILED);
  EXPECT_EQ(obs->ResultFor(101)->message(), "cancelled");
  EXPECT_EQ(obs->Results().size(), 2u);
  auto manifest = store_->GetManifest(*id);
  ASSERT_TRUE(manifest.ok());
  EXPECT_EQ(manifest->results_size(), 2);
  // The manifest says it was cancelled, why, by whom and when.
  EXPECT_EQ(manifest->status(), v1::TRACE_STATUS_CANCELLED);
  EXPECT_EQ(manifest->cancellation().reason(), "the caller cancelled its Trace call");
  EXPECT_EQ(manifest->cancellation().cancelled_by(), "ipv4:10.0.0.5:51234");
  EXPECT_EQ(manifest->cancellation().cancelled_at().seconds(), absl::ToUnixSeconds(clock_.Now()));
  core_->CancelTrace(*id, {});  // no-op
  EXPECT_EQ(core_->ListProcesses({})->processes(1).capture_state(), v1::CAPTURE_STATE_IDLE);
}

TEST_F(DaemonCoreTest, DestroyedWithWorkInFlight) {
  Attach(1, 100, "42");
  auto obs = std::make_shared<RecordingObserver>();
  auto id = Trace("42", absl::Seconds(1), obs);
  ASSERT_TRUE(id.ok());
  SendResult(1, *id, Payload(100, StartsTo(1)[0]));
  core_.reset();
  ASSERT_TRUE(obs->done);
  EXPECT_EQ(obs->final_status.code(), absl::StatusCode::kUnavailable);
  RunAll();  // the worker finishes and its report is dropped safely
}

}  // namespace
}  // namespace gpuctl::daemon
