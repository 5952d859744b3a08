#ifndef GPUCTL_DAEMON_CORE_TESTING_CORE_TEST_FIXTURE_H_
#define GPUCTL_DAEMON_CORE_TESTING_CORE_TEST_FIXTURE_H_

// Test-only: a DaemonCore wired to fakes (clock, loop, worker, peers) and a
// real LocalTraceStore in a temporary directory.

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/common/testing/fake_task_runner.h"
#include "daemon/convert/gzip.h"
#include "daemon/convert/testing/payload_builder.h"
#include "daemon/core/daemon_core.h"
#include "daemon/core/testing/fake_peer_channel.h"
#include "daemon/core/testing/fake_step_counter.h"
#include "daemon/core/testing/vector_payload.h"
#include "daemon/store/local_store.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::daemon {

namespace fs = std::filesystem;
using ::gpuctl::testing::FakeClock;
using ::gpuctl::testing::FakePeerChannel;
using ::gpuctl::testing::FakeStepCounter;
using ::gpuctl::testing::FakeTaskRunner;
using ::gpuctl::testing::ManualExecutor;
using ::gpuctl::testing::PayloadBuilder;
using ::gpuctl::testing::StepsAt;
using ::gpuctl::testing::VectorPayload;

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
    // An empty /proc: the test's pids are not this machine's processes.
    options_.proc_root = tmp_ + "/no-proc";
    MakeCore();
  }
  void TearDown() override {
    core_.reset();
    fs::remove_all(tmp_);
  }
  void MakeCore() {
    core_ = DaemonCore::Create(options_, {.clock = &clock_,
                                          .loop = &loop_,
                                          .worker = &worker_,
                                          .store = store_.get(),
                                          .peers = &peers_,
                                          .metrics = metrics_,
                                          .host_context = host_context_});
  }

  static v1::ipc::Hello MakeHello(int pid, const std::string& job, int rank = -1) {
    v1::ipc::Hello hello;
    hello.set_protocol_major(1);
    hello.set_pid(pid);
    hello.set_job_id(job);
    hello.set_rank(rank);
    hello.set_local_rank(rank);
    hello.set_world_size(rank >= 0 ? 8 : -1);
    hello.set_library_version("0.1.0");
    hello.add_cmdline("python3");
    hello.set_capabilities(v1::ipc::CAPABILITY_MEMFD | v1::ipc::CAPABILITY_HOST_RANGES |
                           v1::ipc::CAPABILITY_STEP_WINDOWS);
    return hello;
  }
  void Attach(PeerId peer, int pid, const std::string& job, int rank = -1) {
    ASSERT_TRUE(
        core_->OnPeerHello(peer, {pid, 1000, 1000}, MakeHello(pid, job, rank), nullptr).ok());
  }
  // Attaches a process sharing a step counter the test moves through the
  // returned reading.
  std::shared_ptr<StepReading> AttachStepping(PeerId peer, int pid, const std::string& job,
                                              int rank, std::shared_ptr<StepReading> reading) {
    v1::ipc::Hello hello = MakeHello(pid, job, rank);
    hello.set_protocol_minor(1);
    hello.set_step_counter(true);
    hello.set_capabilities(hello.capabilities() | v1::ipc::CAPABILITY_STEP_COUNTER);
    EXPECT_TRUE(core_
                    ->OnPeerHello(peer, {pid, 1000, 1000}, hello,
                                  std::make_unique<FakeStepCounter>(reading))
                    .ok());
    return reading;
  }

  absl::StatusOr<std::string> Trace(const std::string& job, absl::Duration d,
                                    std::shared_ptr<RecordingObserver> observer,
                                    const std::vector<int>& pids = {}) {
    v1::TraceRequest req;
    req.mutable_selector()->set_job_id(job);
    for (int pid : pids) req.mutable_selector()->add_pids(pid);
    req.mutable_duration()->set_seconds(absl::ToInt64Seconds(d));
    return core_->StartTrace(req, std::move(observer));
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
  // Set before MakeCore to observe what the core reports.
  CoreMetrics* metrics_ = nullptr;
  // Set before MakeCore to record host context (activities cpu / sched).
  HostContextSource* host_context_ = nullptr;
  std::unique_ptr<DaemonCore> core_;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_TESTING_CORE_TEST_FIXTURE_H_
