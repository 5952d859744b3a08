// Trace requests, selection, the happy path, status and listing.
#include "absl/strings/str_cat.h"
#include "daemon/common/trace_id.h"
#include "daemon/core/testing/core_test_fixture.h"
#include "daemon/core/trace_session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;

TEST_F(DaemonCoreTest, TracesTwoProcessesOfAJob) {
  Attach(1, 100, "42", 0);
  Attach(2, 101, "42", 1);
  Attach(3, 102, "7", 0);
  auto obs = std::make_shared<RecordingObserver>();
  auto id = Trace("42", absl::Seconds(2), obs);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_TRUE(IsValidTraceId(*id));

  ASSERT_EQ(peers_.sent().size(), 2u);
  ASSERT_EQ(StartsTo(1).size(), 1u);
  ASSERT_EQ(StartsTo(2).size(), 1u);
  EXPECT_TRUE(StartsTo(3).empty());
  v1::ipc::StartCapture start = StartsTo(1)[0];
  EXPECT_EQ(start.trace_id(), *id);
  EXPECT_EQ(start.start_time_unix_ns(), absl::ToUnixNanos(clock_.Now() + absl::Milliseconds(100)));
  EXPECT_EQ(start.duration_ns(), 2'000'000'000);
  EXPECT_EQ(start.max_buffer_bytes(), options_.max_buffer_bytes);
  EXPECT_EQ(StartsTo(2)[0].start_time_unix_ns(), start.start_time_unix_ns());

  ASSERT_GE(obs->events.size(), 3u);
  ASSERT_TRUE(obs->events[0].has_started());
  EXPECT_EQ(obs->events[0].started().trace_id(), *id);
  EXPECT_EQ(obs->events[0].started().host(), "h1");
  EXPECT_EQ(obs->events[0].started().processes_size(), 2);
  EXPECT_EQ(obs->CountPhase(v1::PROCESS_PHASE_REQUESTED), 2);

  v1::ipc::CaptureStarted cs;
  cs.set_trace_id(*id);
  core_->OnCaptureStarted(1, cs);
  EXPECT_EQ(obs->CountPhase(v1::PROCESS_PHASE_CAPTURING), 1);
  auto listed = *core_->ListProcesses({});
  ASSERT_EQ(listed.processes_size(), 3);
  EXPECT_EQ(listed.processes(0).capture_state(), v1::CAPTURE_STATE_CAPTURING);
  EXPECT_EQ(listed.processes(0).current_trace_id(), *id);
  EXPECT_EQ(listed.processes(1).capture_state(), v1::CAPTURE_STATE_ARMED);
  EXPECT_EQ(listed.processes(2).capture_state(), v1::CAPTURE_STATE_IDLE);

  clock_.Advance(absl::Seconds(2));
  SendResult(1, *id, Payload(100, start, "fwd-rank0"));
  SendResult(2, *id, Payload(101, start, "fwd-rank1"));
  EXPECT_EQ(obs->CountPhase(v1::PROCESS_PHASE_PROCESSING), 2);
  EXPECT_EQ(worker_.pending(), 2u);  // conversion runs off the loop
  EXPECT_TRUE(obs->Results().empty());
  RunAll();

  ASSERT_TRUE(obs->done);
  EXPECT_TRUE(obs->final_status.ok()) << obs->final_status;
  ASSERT_EQ(obs->Results().size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    const v1::ProcessResult* r = obs->ResultFor(100 + rank);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->status(), v1::CAPTURE_STATUS_OK) << r->message();
    EXPECT_EQ(r->rank(), rank);
    EXPECT_EQ(r->host(), "h1");
    EXPECT_EQ(r->job_id(), "42");
    EXPECT_EQ(r->event_count(), 3u);
    EXPECT_GT(r->payload_bytes(), 0u);
    EXPECT_GT(r->stored_bytes(), 0u);
    EXPECT_EQ(r->file(), absl::StrCat("h1-rank", rank, "-pid", 100 + rank, ".json.gz"));
    nlohmann::json doc = ReadTraceJson(*id, r->file());
    EXPECT_EQ(doc["distributedInfo"]["rank"], rank);
    bool found = false;
    for (const auto& e : doc["traceEvents"]) {
      if (e["name"] == absl::StrCat("fwd-rank", rank)) {
        found = true;
        EXPECT_EQ(e["pid"], 100 + rank);
        EXPECT_EQ(e["ph"], "X");
      }
    }
    EXPECT_TRUE(found);
  }
  const v1::TraceEvent& last = obs->events.back();
  ASSERT_TRUE(last.has_completed());
  EXPECT_EQ(last.completed().processes_ok(), 2u);
  EXPECT_EQ(last.completed().processes_failed(), 0u);
  EXPECT_EQ(last.completed().location(), tmp_ + "/traces/" + *id);
  EXPECT_EQ(last.completed().storage().state(), v1::STORAGE_STATE_LOCAL);
  EXPECT_EQ(last.completed().storage().local_location(), tmp_ + "/traces/" + *id);
  EXPECT_EQ(last.completed().storage().remote_location(), "");

  auto manifest = store_->GetManifest(*id);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->job_id(), "42");
  EXPECT_EQ(manifest->host(), "h1");
  EXPECT_EQ(manifest->duration().seconds(), 2);
  EXPECT_EQ(manifest->results_size(), 2);
  EXPECT_EQ(manifest->location(), last.completed().location());
  EXPECT_EQ(manifest->storage().state(), v1::STORAGE_STATE_LOCAL);
  EXPECT_EQ(manifest->storage().local_location(), last.completed().location());
  EXPECT_EQ(manifest->status(), v1::TRACE_STATUS_COMPLETED);
  EXPECT_FALSE(manifest->has_cancellation());
  EXPECT_EQ(manifest->trigger().kind(), v1::TRIGGER_KIND_ON_DEMAND);
  EXPECT_EQ(loop_.pending_timers(), 0u);  // deadline cancelled
  EXPECT_EQ(core_->GetStatus().active_traces(), 0u);
  EXPECT_EQ(core_->ListProcesses({})->processes(0).capture_state(), v1::CAPTURE_STATE_IDLE);

  // The id cannot be reused.
  v1::TraceRequest again;
  again.mutable_selector()->set_job_id("42");
  again.mutable_duration()->set_seconds(1);
  again.set_trace_id(*id);
  EXPECT_EQ(core_->StartTrace(again, obs).status().code(), absl::StatusCode::kAlreadyExists);
}

// What asked for a trace is stored as given; a trigger without a kind is
// refused before anything is sent.
TEST_F(DaemonCoreTest, RecordsTheTriggerInTheManifest) {
  Attach(1, 100, "42", 0);
  v1::TraceRequest req;
  req.mutable_selector()->set_job_id("42");
  req.mutable_duration()->set_seconds(1);
  auto obs = std::make_shared<RecordingObserver>();
  EXPECT_EQ(core_->StartTrace(req, v1::TraceTrigger(), obs).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(peers_.sent().empty());

  v1::TraceTrigger trigger;
  trigger.set_kind(v1::TRIGGER_KIND_SCHEDULED);
  v1::ScheduledTrigger* scheduled = trigger.mutable_scheduled();
  scheduled->set_rule("hourly");
  scheduled->set_slot(494'000);
  scheduled->set_probability(0.25);
  scheduled->set_weight(4);
  scheduled->set_schedule_fingerprint("ab12");
  auto id = core_->StartTrace(req, trigger, obs);
  ASSERT_TRUE(id.ok()) << id.status();
  v1::ipc::StartCapture start = StartsTo(1)[0];
  clock_.Advance(absl::Seconds(1));
  SendResult(1, *id, Payload(100, start, "step"));
  RunAll();
  ASSERT_TRUE(obs->done);
  auto manifest = store_->GetManifest(*id);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->trigger().SerializeAsString(), trigger.SerializeAsString());
}

// A scheduled trace's results are converted on the background worker, an
// on-demand trace's on the worker: the on-demand trace completes while the
// scheduled one still waits.
TEST_F(DaemonCoreTest, ScheduledConversionRunsOnTheBackgroundWorker) {
  ManualExecutor background;
  core_ = DaemonCore::Create(options_, {.clock = &clock_,
                                        .loop = &loop_,
                                        .worker = &worker_,
                                        .store = store_.get(),
                                        .peers = &peers_,
                                        .background_worker = &background});
  Attach(1, 100, "42", 0);
  Attach(2, 200, "7", 0);
  v1::TraceRequest req;
  req.mutable_selector()->set_job_id("42");
  req.mutable_duration()->set_seconds(1);
  v1::TraceTrigger scheduled;
  scheduled.set_kind(v1::TRIGGER_KIND_SCHEDULED);
  auto sampled = std::make_shared<RecordingObserver>();
  auto sampled_id = core_->StartTrace(req, scheduled, sampled);
  ASSERT_TRUE(sampled_id.ok()) << sampled_id.status();
  auto asked = std::make_shared<RecordingObserver>();
  auto asked_id = Trace("7", absl::Seconds(1), asked);
  ASSERT_TRUE(asked_id.ok()) << asked_id.status();
  clock_.Advance(absl::Seconds(1));
  SendResult(1, *sampled_id, Payload(100, StartsTo(1)[0], "sampled"));
  SendResult(2, *asked_id, Payload(200, StartsTo(2)[0], "asked"));
  EXPECT_EQ(background.pending(), 1u);
  EXPECT_EQ(worker_.pending(), 1u);
  RunAll();
  EXPECT_TRUE(asked->done);
  EXPECT_FALSE(sampled->done);
  background.RunAll();
  RunAll();
  EXPECT_TRUE(sampled->done);
  EXPECT_TRUE(sampled->final_status.ok()) << sampled->final_status;
  core_.reset();
}

// Inline trace data arriving in chunks is reported with its counts, at
// most every kReceiveProgressInterval, and PROCESSING carries the totals.
TEST_F(DaemonCoreTest, ReportsReceivedBytesThrottled) {
  Attach(1, 100, "42", 0);
  auto obs = std::make_shared<RecordingObserver>();
  auto id = Trace("42", absl::Seconds(2), obs);
  ASSERT_TRUE(id.ok()) << id.status();
  v1::ipc::CaptureStarted cs;
  cs.set_trace_id(*id);
  core_->OnCaptureStarted(1, cs);
  clock_.Advance(absl::Seconds(2));
  const v1::ipc::StartCapture start = StartsTo(1)[0];
  std::vector<uint8_t> bytes = Payload(100, start);
  v1::ipc::CaptureResult announced;
  announced.set_trace_id(*id);
  announced.set_status(v1::CAPTURE_STATUS_OK);
  announced.set_transport(v1::ipc::PAYLOAD_TRANSPORT_INLINE);
  announced.set_payload_size(bytes.size());
  announced.set_event_count(3);

  auto received = [&] {
    std::vector<v1::ProcessProgress> out;
    for (const auto& e : obs->events) {
      if (e.has_progress() && e.progress().bytes_total() > 0) out.push_back(e.progress());
    }
    return out;
  };
  // The first chunk is reported at once.
  core_->OnPayloadProgress(1, announced, 10);
  ASSERT_EQ(received().size(), 1u);
  EXPECT_EQ(received()[0].phase(), v1::PROCESS_PHASE_CAPTURING);
  EXPECT_EQ(received()[0].message(), "receiving trace data");
  EXPECT_EQ(received()[0].bytes_received(), 10u);
  EXPECT_EQ(received()[0].bytes_total(), bytes.size());
  EXPECT_EQ(received()[0].events_received(), 3u);
  // Many chunks within the interval: one report, with the latest count,
  // once the interval is over.
  for (uint64_t n = 11; n < 60; ++n) core_->OnPayloadProgress(1, announced, n);
  loop_.RunUntilIdle();
  EXPECT_EQ(received().size(), 1u);
  loop_.AdvanceBy(kReceiveProgressInterval / 2);
  EXPECT_EQ(received().size(), 1u);
  loop_.AdvanceBy(kReceiveProgressInterval / 2);
  ASSERT_EQ(received().size(), 2u);
  EXPECT_EQ(received()[1].bytes_received(), 59u);
  // Nothing new: no report.
  loop_.AdvanceBy(kReceiveProgressInterval * 4);
  EXPECT_EQ(received().size(), 2u);

  SendResult(1, *id, bytes);
  ASSERT_EQ(received().size(), 3u);
  EXPECT_EQ(received()[2].phase(), v1::PROCESS_PHASE_PROCESSING);
  EXPECT_EQ(received()[2].bytes_received(), bytes.size());
  EXPECT_EQ(received()[2].bytes_total(), bytes.size());
  // A chunk reported after the payload is complete changes nothing.
  core_->OnPayloadProgress(1, announced, 20);
  loop_.AdvanceBy(kReceiveProgressInterval * 2);
  EXPECT_EQ(received().size(), 3u);
  RunAll();
  ASSERT_TRUE(obs->done);
  EXPECT_EQ(loop_.pending_timers(), 0u);
}

TEST_F(DaemonCoreTest, NothingMatchedNamesHostAndAttached) {
  Attach(1, 100, "7");
  Attach(2, 101, "7");
  Attach(3, 102, "");
  auto id = Trace("42", absl::Seconds(1), std::make_shared<RecordingObserver>());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(id.status().message(),
            "no attached process matches job \"42\" on host h1 (3 attached: job \"7\" x2, job "
            "\"\" x1)");
  EXPECT_TRUE(peers_.sent().empty());
}

TEST_F(DaemonCoreTest, RejectsBadRequests) {
  Attach(1, 100, "42");
  auto obs = std::make_shared<RecordingObserver>();
  auto code_and_message = [&](const v1::TraceRequest& req) {
    return core_->StartTrace(req, obs).status();
  };
  v1::TraceRequest req;
  req.mutable_selector()->set_job_id("42");
  EXPECT_THAT(code_and_message(req).message(), HasSubstr("duration is required"));
  req.mutable_duration()->set_seconds(0);
  EXPECT_THAT(code_and_message(req).message(), HasSubstr("must be positive"));
  req.mutable_duration()->set_seconds(-3);
  EXPECT_THAT(code_and_message(req).message(), HasSubstr("must be positive, got -3s"));
  req.mutable_duration()->set_seconds(601);
  absl::Status st = code_and_message(req);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("10m"));
  EXPECT_THAT(st.message(), HasSubstr("10m1s"));
  req.mutable_duration()->set_seconds(1);
  req.mutable_duration()->set_nanos(-5);
  EXPECT_THAT(code_and_message(req).message(), HasSubstr("malformed duration"));
  req.mutable_duration()->set_nanos(0);
  req.set_trace_id("../../etc");
  EXPECT_THAT(code_and_message(req).message(), HasSubstr("invalid trace id"));
  req.clear_trace_id();
  req.mutable_selector()->clear_job_id();
  st = code_and_message(req);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "select processes with a job id, pids, ranks or labels");
  EXPECT_TRUE(peers_.sent().empty());
  EXPECT_TRUE(obs->events.empty());
}

TEST_F(DaemonCoreTest, UsesCallerTraceIdAndPidSelector) {
  Attach(1, 100, "42");
  Attach(2, 101, "42");
  v1::TraceRequest req;
  req.mutable_selector()->add_pids(101);
  req.mutable_duration()->set_seconds(1);
  req.set_trace_id("018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b");
  auto id = core_->StartTrace(req, std::make_shared<RecordingObserver>());
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, req.trace_id());
  EXPECT_TRUE(StartsTo(1).empty());
  ASSERT_EQ(StartsTo(2).size(), 1u);
  EXPECT_EQ(StartsTo(2)[0].trace_id(), req.trace_id());
}

TEST_F(DaemonCoreTest, RefusesPidMismatchAndDuplicateHello) {
  v1::ipc::Hello hello;
  hello.set_protocol_major(1);
  hello.set_pid(100);
  absl::Status st = core_->OnPeerHello(1, {101, 0, 0}, hello, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  hello.set_protocol_major(2);
  EXPECT_EQ(core_->OnPeerHello(1, {100, 0, 0}, hello, nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(core_->GetStatus().attached_processes(), 0u);
}

TEST_F(DaemonCoreTest, StatusAndListing) {
  Attach(1, 100, "42");
  Attach(2, 101, "7");
  auto status = core_->GetStatus();
  EXPECT_EQ(status.daemon_version(), "0.1.0");
  EXPECT_EQ(status.host(), "h1");
  EXPECT_EQ(status.listen_address(), "127.0.0.1:7070");
  EXPECT_EQ(status.socket_path(), "/run/gpuctl/gpuctl.sock");
  EXPECT_EQ(status.store_location(), tmp_ + "/traces");
  EXPECT_EQ(status.attached_processes(), 2u);
  EXPECT_EQ(status.ipc_protocol_major(), 1u);
  EXPECT_EQ(status.max_duration().seconds(), 600);
  EXPECT_EQ(status.started_at().seconds(), absl::ToUnixSeconds(clock_.Now()));
  v1::ListProcessesRequest req;
  req.mutable_selector()->set_job_id("7");
  auto listed = *core_->ListProcesses(req);
  EXPECT_EQ(listed.host(), "h1");
  ASSERT_EQ(listed.processes_size(), 1);
  EXPECT_EQ(listed.processes(0).pid(), 101);
}

}  // namespace
}  // namespace gpuctl::daemon
