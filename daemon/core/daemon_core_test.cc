#include "daemon/core/daemon_core.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/common/testing/fake_task_runner.h"
#include "daemon/common/trace_id.h"
#include "daemon/core/gzip.h"
#include "daemon/core/local_store.h"
#include "daemon/core/testing/fake_peer_channel.h"
#include "daemon/core/testing/payload_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::daemon {
namespace {

namespace fs = std::filesystem;
using ::gpuctl::testing::FakeClock;
using ::gpuctl::testing::FakePeerChannel;
using ::gpuctl::testing::FakeTaskRunner;
using ::gpuctl::testing::ManualExecutor;
using ::gpuctl::testing::PayloadBuilder;
using ::gpuctl::testing::VectorPayload;
using ::testing::HasSubstr;

class RecordingObserver : public TraceObserver {
 public:
  void OnEvent(const v1::TraceEvent& event) override {
    EXPECT_FALSE(done) << "event after OnDone";
    events.push_back(event);
  }
  void OnDone(const absl::Status& status) override {
    EXPECT_FALSE(done) << "OnDone twice";
    done = true;
    final_status = status;
  }
  std::vector<v1::ProcessResult> Results() const {
    std::vector<v1::ProcessResult> out;
    for (const auto& e : events) {
      if (e.has_result()) out.push_back(e.result());
    }
    return out;
  }
  const v1::ProcessResult* ResultFor(int pid) const {
    for (const auto& e : events) {
      if (e.has_result() && e.result().pid() == pid) return &e.result();
    }
    return nullptr;
  }
  int CountPhase(v1::ProcessPhase phase) const {
    int n = 0;
    for (const auto& e : events) n += e.has_progress() && e.progress().phase() == phase;
    return n;
  }
  std::vector<v1::TraceEvent> events;
  bool done = false;
  absl::Status final_status;
};

class DaemonCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpuctl-core-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    tmp_ = tmpl;
    store_ = *LocalTraceStore::Create(tmp_ + "/traces");
    options_.hostname = "h1";
    options_.daemon_version = "0.1.0";
    options_.listen_address = "127.0.0.1:7070";
    options_.socket_path = "/run/gpuctl/gpuctl.sock";
    MakeCore();
  }
  void TearDown() override {
    core_.reset();
    fs::remove_all(tmp_);
  }
  void MakeCore() {
    core_ = DaemonCore::Create(options_, {&clock_, &loop_, &worker_, store_.get(), &peers_});
  }

  void Attach(PeerId peer, int pid, const std::string& job, int rank = -1) {
    v1::ipc::Hello hello;
    hello.set_protocol_major(1);
    hello.set_pid(pid);
    hello.set_job_id(job);
    hello.set_rank(rank);
    hello.set_local_rank(rank);
    hello.set_world_size(rank >= 0 ? 2 : -1);
    hello.set_library_version("0.1.0");
    hello.add_cmdline("python3");
    ASSERT_TRUE(core_->OnPeerHello(peer, {pid, 1000, 1000}, hello).ok());
  }

  absl::StatusOr<std::string> Trace(const std::string& job, absl::Duration d,
                                    std::shared_ptr<RecordingObserver> observer,
                                    std::vector<int> pids = {}) {
    v1::TraceRequest req;
    req.mutable_selector()->set_job_id(job);
    for (int pid : pids) req.mutable_selector()->add_pids(pid);
    req.mutable_duration()->set_seconds(absl::ToInt64Seconds(d));
    return core_->StartTrace(req, observer);
  }

  std::vector<v1::ipc::StartCapture> StartsTo(PeerId peer) {
    std::vector<v1::ipc::StartCapture> out;
    for (const auto& s : peers_.SentTo(peer)) {
      if (s.message.has_start_capture()) out.push_back(s.message.start_capture());
    }
    return out;
  }
  std::vector<v1::ipc::CancelCapture> CancelsTo(PeerId peer) {
    std::vector<v1::ipc::CancelCapture> out;
    for (const auto& s : peers_.SentTo(peer)) {
      if (s.message.has_cancel_capture()) out.push_back(s.message.cancel_capture());
    }
    return out;
  }

  // A valid payload for `pid` inside the trace's window.
  std::vector<uint8_t> Payload(int pid, const v1::ipc::StartCapture& start,
                               const std::string& range = "forward") {
    int64_t s = start.start_time_unix_ns();
    PayloadBuilder b(pid, s, s + start.duration_ns());
    b.AddThreadName(static_cast<uint32_t>(pid), "main");
    b.AddRange(static_cast<uint32_t>(pid), s + 1000, s + 2000, range, 0, 1);
    b.AddStep(static_cast<uint32_t>(pid), s + 500, 1);
    return b.Build();
  }

  void SendResult(PeerId peer, const std::string& trace_id, std::vector<uint8_t> bytes) {
    v1::ipc::CaptureResult result;
    result.set_trace_id(trace_id);
    result.set_status(v1::CAPTURE_STATUS_OK);
    result.set_transport(v1::ipc::PAYLOAD_TRANSPORT_MEMFD);
    result.set_payload_size(bytes.size());
    core_->OnCaptureResult(peer, result, std::make_unique<VectorPayload>(std::move(bytes)));
  }

  void RunAll() {
    while (loop_.RunUntilIdle() + worker_.RunAll() > 0) {
    }
  }

  nlohmann::json ReadTraceJson(const std::string& id, const std::string& file) {
    auto reader = store_->Open(id, file);
    EXPECT_TRUE(reader.ok()) << reader.status();
    std::string gz, chunk;
    while ((*reader)->Read(1 << 16, &chunk).ok() && !chunk.empty()) gz += chunk;
    auto text = GzipDecompress(gz);
    EXPECT_TRUE(text.ok());
    return nlohmann::json::parse(*text);
  }

  std::string tmp_;
  FakeClock clock_;
  FakeTaskRunner loop_{&clock_};
  ManualExecutor worker_;
  FakePeerChannel peers_;
  std::unique_ptr<LocalTraceStore> store_;
  CoreOptions options_;
  std::unique_ptr<DaemonCore> core_;
};

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
  auto listed = core_->ListProcesses({});
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

  auto manifest = store_->GetManifest(*id);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->job_id(), "42");
  EXPECT_EQ(manifest->host(), "h1");
  EXPECT_EQ(manifest->duration().seconds(), 2);
  EXPECT_EQ(manifest->results_size(), 2);
  EXPECT_EQ(manifest->location(), last.completed().location());
  EXPECT_EQ(loop_.pending_timers(), 0u);  // deadline cancelled
  EXPECT_EQ(core_->GetStatus().active_traces(), 0u);
  EXPECT_EQ(core_->ListProcesses({}).processes(0).capture_state(), v1::CAPTURE_STATE_IDLE);

  // The id cannot be reused.
  v1::TraceRequest again;
  again.mutable_selector()->set_job_id("42");
  again.mutable_duration()->set_seconds(1);
  again.set_trace_id(*id);
  EXPECT_EQ(core_->StartTrace(again, obs).status().code(), absl::StatusCode::kAlreadyExists);
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
  auto code_and_message = [&](v1::TraceRequest req) {
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
  EXPECT_EQ(st.message(), "select processes with a job id or pids");
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
  EXPECT_EQ(core_->ListProcesses({}).processes(0).current_trace_id(), *first_id);
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
  EXPECT_EQ(core_->ListProcesses({}).processes(1).capture_state(), v1::CAPTURE_STATE_COLLECTING);
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
  core_->CancelTrace(*id);
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
  core_->CancelTrace(*id);  // no-op
  EXPECT_EQ(core_->ListProcesses({}).processes(1).capture_state(), v1::CAPTURE_STATE_IDLE);
}

TEST_F(DaemonCoreTest, RefusesPidMismatchAndDuplicateHello) {
  v1::ipc::Hello hello;
  hello.set_protocol_major(1);
  hello.set_pid(100);
  absl::Status st = core_->OnPeerHello(1, {101, 0, 0}, hello);
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  hello.set_protocol_major(2);
  EXPECT_EQ(core_->OnPeerHello(1, {100, 0, 0}, hello).code(),
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
  auto listed = core_->ListProcesses(req);
  EXPECT_EQ(listed.host(), "h1");
  ASSERT_EQ(listed.processes_size(), 1);
  EXPECT_EQ(listed.processes(0).pid(), 101);
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
