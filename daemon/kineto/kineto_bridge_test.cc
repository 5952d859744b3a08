// The bridge's state machine with a fake clock, a fake loop and a /proc in
// a temporary directory, in front of a real DaemonCore and LocalTraceStore.
#include "daemon/kineto/kineto_bridge.h"

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/testing/fake_clock.h"
#include "daemon/common/testing/fake_task_runner.h"
#include "daemon/convert/gzip.h"
#include "daemon/core/hello_validation.h"
#include "daemon/core/peer_router.h"
#include "daemon/kineto/testing/fake_kineto_proc.h"
#include "daemon/store/local_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon::kineto {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int kPid = 4242;
constexpr char kTraceJson[] =
    R"({"schemaVersion": 1, "traceEvents": [)"
    R"({"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 4242, "tid": 1, "ts": 1, "dur": 2},)"
    R"({"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 4242, "tid": 1, "ts": 4, "dur": 1}]})";

class Observer : public TraceObserver {
 public:
  void OnEvent(const v1::TraceEvent& event) override { events.push_back(event); }
  void OnDone(const absl::Status& status) override { done = true; }
  const v1::ProcessResult* Result() const {
    for (const auto& e : events) {
      if (e.has_result()) return &e.result();
    }
    return nullptr;
  }
  bool Saw(v1::ProcessPhase phase) const {
    for (const auto& e : events) {
      if (e.has_progress() && e.progress().phase() == phase) return true;
    }
    return false;
  }
  std::vector<v1::TraceEvent> events;
  bool done = false;
};

// Counts the reads of a process's memory (environ, cmdline) a registration
// makes, passing every read on to `real`.
class CountingReader final : public KinetoProcReader {
 public:
  explicit CountingReader(const KinetoProcReader* real) : real_(real) {}
  std::optional<ProcIdentity> Identity(int32_t pid) const override { return real_->Identity(pid); }
  absl::flat_hash_map<std::string, std::string> Environment(int32_t pid) const override {
    ++memory_reads;
    return real_->Environment(pid);
  }
  std::vector<std::string> CommandLine(int32_t pid) const override {
    ++memory_reads;
    return real_->CommandLine(pid);
  }
  mutable int memory_reads = 0;

 private:
  const KinetoProcReader* real_;
};

class KinetoBridgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpuctl-kbridge-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    tmp_ = tmpl;
    proc_ = std::make_unique<testing::FakeKinetoProc>(tmp_ + "/proc");
    reader_ = std::make_unique<ProcfsKinetoReader>(proc_->root());
    store_ = *LocalTraceStore::Create(tmp_ + "/traces");
    CoreOptions core_options;
    core_options.hostname = "h1";
    core_options.proc_root = proc_->root();
    core_options.result_grace = absl::Seconds(10);
    core_ = DaemonCore::Create(core_options, {&clock_, &loop_, &worker_, store_.get(), &router_});
    options_.hostname = "h1";
    options_.proc_root = proc_->root();
    MakeBridge();
  }
  void TearDown() override {
    bridge_.reset();
    core_.reset();
    fs::remove_all(tmp_);
  }
  void MakeBridge(const KinetoProcReader* reader = nullptr) {
    bridge_ = std::make_unique<KinetoBridge>(
        options_, KinetoBridge::Deps{&clock_, &loop_, &worker_, core_.get(),
                                     reader != nullptr ? reader : reader_.get()});
    router_.set_kineto(bridge_.get());
  }
  void AddProcess(int pid, uint64_t start = 1000,
                  std::map<std::string, std::string> env = {
                      {"GPUCTL_JOB_ID", "J"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}}) {
    testing::FakeKinetoProc::Process p;
    p.pid = pid;
    p.start_time = start;
    p.env = std::move(env);
    proc_->Add(p);
  }
  // A heartbeat from `pid` (claiming `claimed`); the config text answered.
  std::string Beat(int pid, bool idle = true, int claimed = 0) {
    KinetoRequest request;
    request.type = idle ? 3 : 1;
    request.pids = {claimed == 0 ? pid : claimed, 1};
    std::optional<std::string> reply = bridge_->OnDatagram(
        {.pid = pid, .uid = getuid(), .gid = getgid()}, request, KinetoSocket::kAbstract);
    EXPECT_TRUE(reply.has_value());
    RunAll();
    return reply.has_value() ? reply->substr(kMetadataBytes) : "";
  }
  void RunAll() {
    while (loop_.RunUntilIdle() + worker_.RunAll() > 0) {
    }
  }
  // Moves time on in `step`s, with a heartbeat from `pid` after each.
  void BeatFor(int pid, absl::Duration total, absl::Duration step, bool idle) {
    for (absl::Duration t; t < total; t += step) {
      loop_.AdvanceBy(step);
      Beat(pid, idle);
    }
  }
  absl::StatusOr<std::string> Trace(std::shared_ptr<Observer> observer, absl::Duration d) {
    v1::TraceRequest request;
    request.mutable_selector()->set_job_id("J");
    request.mutable_duration()->set_seconds(absl::ToInt64Seconds(d));
    return core_->StartTrace(request, std::move(observer));
  }
  // A 2 s trace of kPid, attached now, whose config went out with its next
  // poll; fails when the poll carried no config.
  absl::StatusOr<std::string> DeliveredTrace(std::shared_ptr<Observer> observer) {
    AddProcess(kPid);
    Beat(kPid);
    absl::StatusOr<std::string> id = Trace(std::move(observer), absl::Seconds(2));
    if (!id.ok()) return id;
    loop_.AdvanceBy(absl::Seconds(5));
    if (!absl::StrContains(Beat(kPid), "PROFILE_START_TIME=")) {
      return absl::InternalError("the next poll carried no config");
    }
    return id;
  }
  std::string WrittenFile(const std::string& trace_id, int pid) {
    return absl::StrCat(proc_->Tmp(pid), "/gpuctl-kineto-", trace_id, "_", pid, ".json");
  }
  v1::ListProcessesResponse List() {
    v1::ListProcessesRequest request;
    return *core_->ListProcesses(request);
  }

  std::string tmp_;
  gpuctl::testing::FakeClock clock_;
  gpuctl::testing::FakeTaskRunner loop_{&clock_};
  gpuctl::testing::ManualExecutor worker_;
  PeerRouter router_;
  std::unique_ptr<testing::FakeKinetoProc> proc_;
  std::unique_ptr<ProcfsKinetoReader> reader_;
  std::unique_ptr<LocalTraceStore> store_;
  std::unique_ptr<DaemonCore> core_;
  KinetoBridgeOptions options_;
  std::unique_ptr<KinetoBridge> bridge_;
};

TEST_F(KinetoBridgeTest, HeartbeatRegistersAProcessFromItsEnvironment) {
  AddProcess(kPid);
  EXPECT_EQ(Beat(kPid), "");
  loop_.AdvanceBy(absl::Seconds(1));
  Beat(kPid, /*idle=*/false);
  v1::ListProcessesResponse list = List();
  ASSERT_EQ(list.processes_size(), 1);
  const v1::ProcessInfo& info = list.processes(0);
  EXPECT_EQ(info.pid(), kPid);
  EXPECT_EQ(info.job_id(), "J");
  EXPECT_EQ(info.rank(), 1);
  EXPECT_EQ(info.world_size(), 2);
  EXPECT_EQ(info.kind(), v1::PROCESS_KIND_KINETO);
  EXPECT_TRUE(info.profiler_busy());
  EXPECT_EQ(info.poll_period().seconds(), 1);
  EXPECT_THAT(info.cmdline(), ::testing::ElementsAre("python", "train.py"));
  EXPECT_EQ(bridge_->size(), 1u);
}

TEST_F(KinetoBridgeTest, ANewProcessIsReadOnTheWorkerNeverOnTheLoop) {
  CountingReader counting(reader_.get());
  MakeBridge(&counting);
  AddProcess(kPid);
  KinetoRequest request;
  request.type = 3;
  request.pids = {kPid};
  const PeerCredentials creds{.pid = kPid, .uid = getuid(), .gid = getgid()};
  // Answered at once, and a second heartbeat while the read is pending
  // queues no second read.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(bridge_->OnDatagram(creds, request, KinetoSocket::kAbstract).has_value());
    loop_.RunUntilIdle();
  }
  EXPECT_EQ(counting.memory_reads, 0);
  EXPECT_EQ(bridge_->size(), 0u);
  EXPECT_EQ(worker_.RunAll(), 1u);
  EXPECT_EQ(counting.memory_reads, 2);  // environ and cmdline, once
  loop_.RunUntilIdle();
  ASSERT_EQ(bridge_->size(), 1u);
  EXPECT_EQ(List().processes(0).job_id(), "J");
}

TEST_F(KinetoBridgeTest, AProcessGoneWhileItWasReadIsNotRegistered) {
  AddProcess(kPid);
  KinetoRequest request;
  request.type = 3;
  request.pids = {kPid};
  bridge_->OnDatagram({.pid = kPid, .uid = getuid(), .gid = getgid()}, request,
                      KinetoSocket::kAbstract);
  worker_.RunAll();
  proc_->Remove(kPid);
  RunAll();
  EXPECT_EQ(bridge_->size(), 0u);
  EXPECT_EQ(List().processes_size(), 0);
}

TEST_F(KinetoBridgeTest, KinetoJobIdWhenTheEnvironmentHasNone) {
  AddProcess(kPid, 1000, {});
  KinetoRequest request;
  request.type = 3;
  request.job_id = 77;
  request.pids = {kPid};
  bridge_->OnDatagram({.pid = kPid, .uid = getuid()}, request, KinetoSocket::kPath);
  RunAll();
  ASSERT_EQ(List().processes_size(), 1);
  EXPECT_EQ(List().processes(0).job_id(), "77");
  EXPECT_EQ(List().processes(0).rank(), -1);
}

TEST_F(KinetoBridgeTest, SenderClaimingAnotherPidIsRefused) {
  AddProcess(kPid);
  AddProcess(5000);
  EXPECT_EQ(Beat(kPid, true, /*claimed=*/5000), "");
  EXPECT_EQ(bridge_->size(), 0u);
  EXPECT_EQ(bridge_->refused(), 1u);
}

TEST_F(KinetoBridgeTest, ContainerPidClaimMatchesNsPid) {
  testing::FakeKinetoProc::Process p;
  p.pid = kPid;
  p.own_pid = 7;
  p.env = {{"GPUCTL_JOB_ID", "J"}};
  proc_->Add(p);
  Beat(kPid, true, /*claimed=*/7);
  EXPECT_EQ(bridge_->size(), 1u);
}

TEST_F(KinetoBridgeTest, TraceDeliversConfigAtNextPollAndStoresTheFile) {
  AddProcess(kPid);
  Beat(kPid);
  auto observer = std::make_shared<Observer>();
  const absl::Time asked = clock_.Now();
  absl::StatusOr<std::string> id = Trace(observer, absl::Seconds(2));
  ASSERT_TRUE(id.ok()) << id.status();
  // The window waits for the next poll (5s away), the tick and the warm-up.
  const v1::TraceStarted& started = observer->events.front().started();
  const absl::Time start = absl::FromUnixSeconds(started.start_time().seconds()) +
                           absl::Nanoseconds(started.start_time().nanos());
  EXPECT_GE(start - asked, absl::Seconds(7));
  EXPECT_LE(start - asked, absl::Seconds(8));

  loop_.AdvanceBy(absl::Seconds(5));
  const std::string config = Beat(kPid);
  EXPECT_THAT(config,
              HasSubstr(absl::StrCat("ACTIVITIES_LOG_FILE=/tmp/gpuctl-kineto-", *id, ".json\n")));
  EXPECT_THAT(config, HasSubstr(absl::StrCat("REQUEST_TRACE_ID=", *id, "\n")));
  EXPECT_THAT(config, HasSubstr("ACTIVITIES_DURATION_MSECS=2000\n"));
  EXPECT_THAT(config, HasSubstr(absl::StrCat("PROFILE_START_TIME=", absl::ToUnixMillis(start))));
  // Delivered once.
  loop_.AdvanceBy(absl::Seconds(1));
  EXPECT_EQ(Beat(kPid, /*idle=*/false), "");
  EXPECT_TRUE(observer->Saw(v1::PROCESS_PHASE_CAPTURING));
  EXPECT_TRUE(List().processes(0).profiler_busy());

  // Nothing yet past the window: the sweep keeps looking.
  BeatFor(kPid, absl::Seconds(4), absl::Seconds(1), /*idle=*/false);
  EXPECT_EQ(observer->Result(), nullptr);
  testing::FakeKinetoProc::Write(WrittenFile(*id, kPid), kTraceJson);
  loop_.AdvanceBy(absl::Seconds(1));
  RunAll();
  ASSERT_NE(observer->Result(), nullptr);
  const v1::ProcessResult& result = *observer->Result();
  EXPECT_EQ(result.status(), v1::CAPTURE_STATUS_OK) << result.message();
  EXPECT_EQ(result.file(), absl::StrCat("h1-rank1-pid", kPid, ".json.gz"));
  EXPECT_EQ(result.window_start().seconds(), absl::ToUnixSeconds(start));
  EXPECT_FALSE(result.late_start());
  EXPECT_FALSE(fs::exists(WrittenFile(*id, kPid)));
  EXPECT_TRUE(observer->done);
  // Free for the next trace at once, though the last heartbeat said busy.
  EXPECT_FALSE(List().processes(0).profiler_busy());
  auto next = std::make_shared<Observer>();
  ASSERT_TRUE(Trace(next, absl::Seconds(2)).ok());
  RunAll();
  EXPECT_EQ(next->Result(), nullptr);
  auto reader = store_->Open(*id, result.file());
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::string gz, chunk;
  while ((*reader)->Read(1 << 16, &chunk).ok() && !chunk.empty()) gz += chunk;
  EXPECT_THAT(*GzipDecompress(gz), HasSubstr("aten::addmm"));
}

TEST_F(KinetoBridgeTest, TheResultSaysWhenKinetoReallyRecorded) {
  auto observer = std::make_shared<Observer>();
  absl::StatusOr<std::string> id = DeliveredTrace(observer);
  ASSERT_TRUE(id.ok()) << id.status();
  BeatFor(kPid, absl::Seconds(5), absl::Seconds(1), /*idle=*/false);
  // kineto opened 1.5 s after the instant asked for and recorded 2 s: its
  // profiler span says so.
  const v1::TraceStarted& started = observer->events.front().started();
  const int64_t planned_ns =
      absl::ToUnixNanos(absl::FromUnixSeconds(started.start_time().seconds()) +
                        absl::Nanoseconds(started.start_time().nanos()));
  const int64_t base_ns = planned_ns - 1'000'000'000;
  testing::FakeKinetoProc::Write(
      WrittenFile(*id, kPid),
      absl::StrCat(
          R"({"baseTimeNanoseconds": )", base_ns, R"(, "traceEvents": [)",
          R"j({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "ts": 2500000, "dur": 2000000},)j",
          R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 2600000, "dur": 5}]})"));
  loop_.AdvanceBy(absl::Seconds(1));
  RunAll();
  ASSERT_NE(observer->Result(), nullptr);
  const v1::ProcessResult& result = *observer->Result();
  ASSERT_EQ(result.status(), v1::CAPTURE_STATUS_OK) << result.message();
  auto ns = [](const google::protobuf::Timestamp& t) {
    return t.seconds() * 1'000'000'000 + t.nanos();
  };
  EXPECT_EQ(ns(result.window_start()), planned_ns + 1'500'000'000);
  EXPECT_EQ(ns(result.window_end()), planned_ns + 3'500'000'000);
}

TEST_F(KinetoBridgeTest, ACancelledCapturesFileIsRemovedWhenItAppears) {
  auto observer = std::make_shared<Observer>();
  absl::StatusOr<std::string> id = DeliveredTrace(observer);
  ASSERT_TRUE(id.ok()) << id.status();
  loop_.AdvanceBy(absl::Seconds(1));
  Beat(kPid, /*idle=*/false);
  // kineto has taken the window and cannot be stopped.
  v1::TraceCancellation why;
  why.set_reason("the caller cancelled");
  core_->CancelTrace(*id, why);
  RunAll();
  BeatFor(kPid, absl::Seconds(4), absl::Seconds(1), /*idle=*/false);
  testing::FakeKinetoProc::Write(WrittenFile(*id, kPid), kTraceJson);
  loop_.AdvanceBy(absl::Seconds(1));
  RunAll();
  EXPECT_FALSE(fs::exists(WrittenFile(*id, kPid)));
  // Nothing stored for it, and the process is free for the next trace.
  ASSERT_NE(observer->Result(), nullptr);
  EXPECT_NE(observer->Result()->status(), v1::CAPTURE_STATUS_OK);
  EXPECT_FALSE(store_->Open(*id, absl::StrCat("h1-rank1-pid", kPid, ".json.gz")).ok());
  Beat(kPid);
  EXPECT_TRUE(Trace(std::make_shared<Observer>(), absl::Seconds(2)).ok());
}

TEST_F(KinetoBridgeTest, ACancelledCapturesFileIsWaitedForABoundedTime) {
  absl::StatusOr<std::string> id = DeliveredTrace(std::make_shared<Observer>());
  ASSERT_TRUE(id.ok()) << id.status();
  core_->CancelTrace(*id, v1::TraceCancellation());
  RunAll();
  // Past the wait, a file that appears late is left alone (and logged).
  BeatFor(kPid, absl::Minutes(3), absl::Seconds(5), /*idle=*/true);
  testing::FakeKinetoProc::Write(WrittenFile(*id, kPid), kTraceJson);
  BeatFor(kPid, absl::Seconds(5), absl::Seconds(1), /*idle=*/true);
  EXPECT_TRUE(fs::exists(WrittenFile(*id, kPid)));
}

TEST_F(KinetoBridgeTest, BusyProfilerEndsTheCaptureAsBusy) {
  AddProcess(kPid);
  Beat(kPid, /*idle=*/false);
  auto observer = std::make_shared<Observer>();
  ASSERT_TRUE(Trace(observer, absl::Seconds(2)).ok());
  RunAll();
  ASSERT_NE(observer->Result(), nullptr);
  EXPECT_EQ(observer->Result()->status(), v1::CAPTURE_STATUS_BUSY);
  EXPECT_THAT(observer->Result()->message(), HasSubstr("torch.profiler"));
}

TEST_F(KinetoBridgeTest, ProfilerTakenBeforeDeliveryIsBusy) {
  AddProcess(kPid);
  Beat(kPid);
  auto observer = std::make_shared<Observer>();
  ASSERT_TRUE(Trace(observer, absl::Seconds(2)).ok());
  loop_.AdvanceBy(absl::Seconds(5));
  EXPECT_EQ(Beat(kPid, /*idle=*/false), "");
  ASSERT_NE(observer->Result(), nullptr);
  EXPECT_EQ(observer->Result()->status(), v1::CAPTURE_STATUS_BUSY);
}

TEST_F(KinetoBridgeTest, FileOverTheCapIsRefusedAndRemoved) {
  options_.max_trace_bytes = 64;
  MakeBridge();
  AddProcess(kPid);
  Beat(kPid);
  auto observer = std::make_shared<Observer>();
  absl::StatusOr<std::string> id = Trace(observer, absl::Seconds(1));
  ASSERT_TRUE(id.ok());
  loop_.AdvanceBy(absl::Seconds(5));
  Beat(kPid);
  testing::FakeKinetoProc::Write(WrittenFile(*id, kPid), kTraceJson);
  BeatFor(kPid, absl::Seconds(5), absl::Seconds(1), /*idle=*/true);
  ASSERT_NE(observer->Result(), nullptr);
  EXPECT_EQ(observer->Result()->status(), v1::CAPTURE_STATUS_REJECTED);
  EXPECT_THAT(observer->Result()->message(), HasSubstr("over the cap of 64 bytes"));
  EXPECT_FALSE(fs::exists(WrittenFile(*id, kPid)));
}

TEST_F(KinetoBridgeTest, FilesOfOneTracePickedUpTogetherStayUnderTheTraceCap) {
  // Room for one file of the trace, not two; each alone is under the
  // per-file cap.
  options_.max_total_bytes = sizeof(kTraceJson) + 16;
  MakeBridge();
  constexpr int kOther = 5000;
  for (int pid : {kPid, kOther}) {
    AddProcess(pid);
    Beat(pid);
  }
  auto observer = std::make_shared<Observer>();
  absl::StatusOr<std::string> id = Trace(observer, absl::Seconds(1));
  ASSERT_TRUE(id.ok());
  loop_.AdvanceBy(absl::Seconds(5));
  for (int pid : {kPid, kOther}) {
    ASSERT_THAT(Beat(pid), HasSubstr("PROFILE_START_TIME="));
  }
  loop_.AdvanceBy(absl::Seconds(5));
  for (int pid : {kPid, kOther}) testing::FakeKinetoProc::Write(WrittenFile(*id, pid), kTraceJson);
  // One sweep schedules both pickups before the worker reads either file.
  loop_.AdvanceBy(absl::Seconds(1));
  loop_.RunUntilIdle();
  RunAll();
  std::vector<v1::CaptureStatus> statuses;
  for (const auto& e : observer->events) {
    if (!e.has_result()) continue;
    statuses.push_back(e.result().status());
    if (e.result().status() == v1::CAPTURE_STATUS_REJECTED) {
      EXPECT_THAT(e.result().message(), HasSubstr("kineto.max_total_bytes"));
    }
  }
  EXPECT_THAT(statuses,
              ::testing::UnorderedElementsAre(v1::CAPTURE_STATUS_OK, v1::CAPTURE_STATUS_REJECTED));
  for (int pid : {kPid, kOther}) EXPECT_FALSE(fs::exists(WrittenFile(*id, pid)));
}

TEST_F(KinetoBridgeTest, NotAKinetoTraceIsRejected) {
  AddProcess(kPid);
  Beat(kPid);
  auto observer = std::make_shared<Observer>();
  absl::StatusOr<std::string> id = Trace(observer, absl::Seconds(1));
  ASSERT_TRUE(id.ok());
  loop_.AdvanceBy(absl::Seconds(5));
  Beat(kPid);
  testing::FakeKinetoProc::Write(WrittenFile(*id, kPid), "[1, 2, 3]");
  BeatFor(kPid, absl::Seconds(5), absl::Seconds(1), /*idle=*/true);
  ASSERT_NE(observer->Result(), nullptr);
  EXPECT_EQ(observer->Result()->status(), v1::CAPTURE_STATUS_REJECTED);
  EXPECT_THAT(observer->Result()->message(), HasSubstr("invalid kineto trace"));
}

TEST_F(KinetoBridgeTest, SymlinkedTraceFileIsNotFollowed) {
  AddProcess(kPid);
  Beat(kPid);
  auto observer = std::make_shared<Observer>();
  absl::StatusOr<std::string> id = Trace(observer, absl::Seconds(1));
  ASSERT_TRUE(id.ok());
  loop_.AdvanceBy(absl::Seconds(5));
  Beat(kPid);
  const std::string secret = tmp_ + "/secret.json";
  testing::FakeKinetoProc::Write(secret, kTraceJson);
  fs::create_symlink(secret, WrittenFile(*id, kPid));
  BeatFor(kPid, absl::Seconds(5), absl::Seconds(1), /*idle=*/true);
  ASSERT_NE(observer->Result(), nullptr);
  EXPECT_EQ(observer->Result()->status(), v1::CAPTURE_STATUS_REJECTED);
  EXPECT_TRUE(fs::exists(secret));
}

TEST_F(KinetoBridgeTest, NoFileTimesOut) {
  AddProcess(kPid);
  Beat(kPid);
  auto observer = std::make_shared<Observer>();
  ASSERT_TRUE(Trace(observer, absl::Seconds(1)).ok());
  BeatFor(kPid, absl::Seconds(25), absl::Seconds(1), /*idle=*/true);
  ASSERT_NE(observer->Result(), nullptr);
  EXPECT_EQ(observer->Result()->status(), v1::CAPTURE_STATUS_TIMED_OUT);
  EXPECT_THAT(observer->Result()->message(),
              HasSubstr("kineto took its config at a poll 17.5s ago but never reported its "
                        "profiler active"));
}

TEST_F(KinetoBridgeTest, ARecordedWindowWithoutAFileTimesOutNamingTheFile) {
  auto observer = std::make_shared<Observer>();
  absl::StatusOr<std::string> id = DeliveredTrace(observer);
  ASSERT_TRUE(id.ok()) << id.status();
  BeatFor(kPid, absl::Seconds(25), absl::Seconds(1), /*idle=*/false);
  ASSERT_NE(observer->Result(), nullptr);
  EXPECT_EQ(observer->Result()->status(), v1::CAPTURE_STATUS_TIMED_OUT);
  EXPECT_THAT(observer->Result()->message(),
              HasSubstr("and recorded, but wrote no /tmp/gpuctl-kineto-" + *id + "_4242.json"));
}

TEST_F(KinetoBridgeTest, AProcessThatNeverPollsAgainTimesOutSayingSo) {
  options_.min_expiry = absl::Minutes(1);
  MakeBridge();
  AddProcess(kPid);
  Beat(kPid);
  auto observer = std::make_shared<Observer>();
  ASSERT_TRUE(Trace(observer, absl::Seconds(1)).ok());
  loop_.AdvanceBy(absl::Seconds(30));
  RunAll();
  ASSERT_NE(observer->Result(), nullptr);
  EXPECT_EQ(observer->Result()->status(), v1::CAPTURE_STATUS_TIMED_OUT);
  EXPECT_THAT(observer->Result()->message(),
              HasSubstr("kineto has not polled for its config since the request"));
}

TEST_F(KinetoBridgeTest, SilentProcessIsLostAndExitedProcessExits) {
  AddProcess(kPid);
  AddProcess(5000);
  Beat(kPid);
  Beat(5000);
  auto observer = std::make_shared<Observer>();
  ASSERT_TRUE(Trace(observer, absl::Seconds(2)).ok());
  proc_->Remove(5000);
  // 3 poll periods of 5s without a heartbeat.
  loop_.AdvanceBy(absl::Seconds(16));
  RunAll();
  EXPECT_EQ(bridge_->size(), 0u);
  int lost = 0, exited = 0;
  for (const auto& e : observer->events) {
    if (!e.has_result()) continue;
    lost += e.result().status() == v1::CAPTURE_STATUS_LOST;
    exited += e.result().status() == v1::CAPTURE_STATUS_EXITED;
    if (e.result().status() == v1::CAPTURE_STATUS_LOST) {
      EXPECT_THAT(e.result().message(), HasSubstr("no heartbeat"));
    }
  }
  EXPECT_EQ(lost, 1);
  EXPECT_EQ(exited, 1);
  EXPECT_EQ(List().processes_size(), 0);
}

TEST_F(KinetoBridgeTest, ReusedPidIsANewProcess) {
  AddProcess(kPid, 1000);
  Beat(kPid);
  auto observer = std::make_shared<Observer>();
  ASSERT_TRUE(Trace(observer, absl::Seconds(2)).ok());
  // Another process now has the pid: the first one's capture ends, and the
  // new one is registered on its own, idle.
  AddProcess(kPid, 2000);
  EXPECT_EQ(Beat(kPid), "");
  ASSERT_NE(observer->Result(), nullptr);
  EXPECT_EQ(observer->Result()->status(), v1::CAPTURE_STATUS_EXITED);
  ASSERT_EQ(List().processes_size(), 1);
  EXPECT_EQ(List().processes(0).capture_state(), v1::CAPTURE_STATE_IDLE);
  EXPECT_EQ(bridge_->size(), 1u);
}

TEST_F(KinetoBridgeTest, ProcessWithTheLibraryIsLeftToTheLibrary) {
  AddProcess(kPid);
  v1::ipc::Hello hello;
  hello.set_protocol_major(kIpcProtocolMajor);
  hello.set_pid(kPid);
  hello.set_job_id("J");
  hello.set_rank(-1);
  hello.set_local_rank(-1);
  hello.set_world_size(-1);
  ASSERT_TRUE(core_->OnPeerHello(7, {.pid = kPid, .uid = getuid()}, hello, nullptr).ok());
  Beat(kPid);
  EXPECT_EQ(bridge_->size(), 0u);
  ASSERT_EQ(List().processes_size(), 1);
  EXPECT_EQ(List().processes(0).kind(), v1::PROCESS_KIND_LIBRARY);
}

TEST_F(KinetoBridgeTest, RegistryIsBounded) {
  options_.max_processes = 2;
  MakeBridge();
  for (int pid : {100, 101, 102}) {
    AddProcess(pid);
    Beat(pid);
  }
  EXPECT_EQ(bridge_->size(), 2u);
  EXPECT_EQ(List().processes_size(), 2);
}

TEST_F(KinetoBridgeTest, IterationWindowAsksForIterationsWithATimeFallback) {
  AddProcess(kPid);
  Beat(kPid);
  auto observer = std::make_shared<Observer>();
  v1::TraceRequest request;
  request.mutable_selector()->set_job_id("J");
  request.set_iterations(3);
  request.mutable_duration()->set_seconds(30);
  ASSERT_TRUE(core_->StartTrace(request, observer).ok());
  loop_.AdvanceBy(absl::Seconds(5));
  const std::string config = Beat(kPid);
  EXPECT_THAT(config, HasSubstr("ACTIVITIES_ITERATIONS=3\nPROFILE_START_ITERATION_ROUNDUP=1\n"));
  EXPECT_THAT(config, HasSubstr("ACTIVITIES_DURATION_MSECS=2000\n"));
}

TEST_F(KinetoBridgeTest, AnIterationResultGivesTheStepsKinetoRecorded) {
  AddProcess(kPid);
  Beat(kPid);
  auto observer = std::make_shared<Observer>();
  v1::TraceRequest request;
  request.mutable_selector()->set_job_id("J");
  request.set_iterations(3);
  request.mutable_duration()->set_seconds(30);
  absl::StatusOr<std::string> id = core_->StartTrace(request, observer);
  ASSERT_TRUE(id.ok());
  loop_.AdvanceBy(absl::Seconds(5));
  ASSERT_THAT(Beat(kPid), HasSubstr("ACTIVITIES_ITERATIONS=3"));
  loop_.AdvanceBy(absl::Seconds(3));
  Beat(kPid, /*idle=*/false);
  // kineto stopped a step late: four optimizer.step() ranges.
  std::string events;
  for (int i = 0; i < 4; ++i) {
    absl::StrAppend(&events, i == 0 ? "" : ",",
                    R"({"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", )",
                    R"("ts": )", 10 * i, R"(, "dur": 2})");
  }
  testing::FakeKinetoProc::Write(WrittenFile(*id, kPid),
                                 absl::StrCat(R"({"traceEvents": [)", events, "]}"));
  loop_.AdvanceBy(absl::Seconds(1));
  Beat(kPid, /*idle=*/true);
  ASSERT_NE(observer->Result(), nullptr);
  EXPECT_EQ(observer->Result()->status(), v1::CAPTURE_STATUS_OK);
  EXPECT_EQ(observer->Result()->steps(), 4u);
}

TEST_F(KinetoBridgeTest, RequestedProfileOptionsAreSent) {
  AddProcess(kPid);
  Beat(kPid);
  v1::TraceRequest request;
  request.mutable_selector()->set_job_id("J");
  request.mutable_duration()->set_seconds(1);
  request.add_kineto_options("with_stack");
  request.add_kineto_options("profile_memory");
  ASSERT_TRUE(core_->StartTrace(request, std::make_shared<Observer>()).ok());
  loop_.AdvanceBy(absl::Seconds(5));
  const std::string config = Beat(kPid);
  EXPECT_THAT(config, HasSubstr("PROFILE_WITH_STACK=true\n"));
  EXPECT_THAT(config, HasSubstr("PROFILE_PROFILE_MEMORY=true\n"));
  EXPECT_THAT(config, ::testing::Not(HasSubstr("PROFILE_WITH_FLOPS")));
}

TEST_F(KinetoBridgeTest, OldContextMessageIsAnswered) {
  std::optional<std::string> reply = bridge_->OnDatagram(
      {.pid = kPid, .uid = getuid()}, KinetoContext{.gpu = 0, .pid = kPid}, KinetoSocket::kPath);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->size(), kMetadataBytes + 4);
}

}  // namespace
}  // namespace gpuctl::daemon::kineto
