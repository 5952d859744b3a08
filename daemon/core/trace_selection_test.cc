// Selection (roles, ranks, labels), late joins and live step counters as
// the core handles them.
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "daemon/core/registry.h"
#include "daemon/core/testing/trace_test_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::ElementsAre;

TEST_F(TraceTest, AProcessAttachingDuringATimeWindowJoinsIt) {
  Attach(1, 100, "42", 0);
  auto obs = std::make_shared<RecordingObserver>();
  v1::TraceRequest req = JobRequest("42", absl::Seconds(2));
  *req.mutable_max_start_skew() = Dur(absl::Milliseconds(20));
  auto id = core_->StartTrace(req, obs);
  ASSERT_TRUE(id.ok());
  const v1::ipc::StartCapture first = StartsTo(1)[0];

  loop_.AdvanceBy(absl::Seconds(1));
  Attach(2, 101, "42", 1);
  Attach(3, 102, "7", 0);  // another job: not joined
  EXPECT_TRUE(StartsTo(2).empty()) << "StartCapture waits for the HelloAck to go first";
  loop_.RunUntilIdle();
  ASSERT_EQ(StartsTo(2).size(), 1u);
  EXPECT_TRUE(StartsTo(3).empty());
  const v1::ipc::StartCapture joined = StartsTo(2)[0];
  EXPECT_EQ(joined.trace_id(), *id);
  EXPECT_EQ(joined.start_time_unix_ns(), first.start_time_unix_ns());
  EXPECT_EQ(joined.duration_ns(), first.duration_ns());
  EXPECT_EQ(joined.max_start_skew_ns(), 20'000'000);
  const v1::TraceEvent& event = obs->events.back();
  ASSERT_TRUE(event.has_progress());
  EXPECT_EQ(event.progress().pid(), 101);
  EXPECT_EQ(event.progress().phase(), v1::PROCESS_PHASE_REQUESTED);
  EXPECT_EQ(event.progress().joined().pid(), 101);
  EXPECT_EQ(event.progress().joined().rank(), 1);
  EXPECT_EQ(core_->ListProcesses({})->processes(1).capture_state(), v1::CAPTURE_STATE_ARMED);

  // The first process delivers; the joiner opened late and runs its full
  // window from now, so the deadline waits for it.
  const int64_t s = first.start_time_unix_ns();
  v1::ipc::CaptureResult result;
  result.set_trace_id(*id);
  result.set_window_start_unix_ns(s);
  result.set_window_end_unix_ns(s + 2'000'000'000);
  SendCaptureResult(1, result, WindowPayload(100, s, s + 2'000'000'000));
  RunAll();
  loop_.AdvanceBy(absl::Seconds(2 + 10) - absl::Nanoseconds(1));
  EXPECT_EQ(obs->ResultFor(101), nullptr) << "not timed out at the original deadline";
  loop_.AdvanceBy(absl::Nanoseconds(1));
  RunAll();
  ASSERT_TRUE(obs->done);
  EXPECT_FALSE(obs->ResultFor(100)->joined_late());
  const v1::ProcessResult* late = obs->ResultFor(101);
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(late->status(), v1::CAPTURE_STATUS_TIMED_OUT);
  EXPECT_TRUE(late->joined_late());
  auto manifest = store_->GetManifest(*id);
  ASSERT_TRUE(manifest.ok());
  ASSERT_EQ(manifest->results_size(), 2);
  EXPECT_TRUE(manifest->results(1).joined_late());
}

TEST_F(TraceTest, AProcessGoneBeforeItCouldJoinIsLeftOut) {
  Attach(1, 100, "42", 0);
  auto obs = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(core_->StartTrace(JobRequest("42", absl::Seconds(2)), obs).ok());
  Attach(2, 101, "42", 1);
  core_->OnPeerGone(2, /*clean=*/true, "exited");
  loop_.RunUntilIdle();
  EXPECT_TRUE(StartsTo(2).empty());
  EXPECT_EQ(Started(*obs).processes_size(), 1);
  EXPECT_EQ(obs->CountPhase(v1::PROCESS_PHASE_REQUESTED), 1);
}

TEST_F(TraceTest, AProcessSelectedBeforeItsJoinRanIsNotAddedTwice) {
  Attach(1, 100, "42", 0);  // its join task is still queued
  auto obs = std::make_shared<RecordingObserver>();
  auto id = core_->StartTrace(JobRequest("42", absl::Seconds(2)), obs);
  ASSERT_TRUE(id.ok());
  SendResult(1, *id, Payload(100, StartsTo(1)[0]));  // idle again while processing
  RunAll();
  ASSERT_TRUE(obs->done);
  EXPECT_EQ(obs->Results().size(), 1u);
  EXPECT_EQ(StartsTo(1).size(), 1u);
}

TEST_F(TraceTest, NoJoinAfterTheWindowOrForPidsOrLimitedSelectors) {
  Attach(1, 100, "42", 0);
  auto id =
      core_->StartTrace(JobRequest("42", absl::Seconds(2)), std::make_shared<RecordingObserver>());
  ASSERT_TRUE(id.ok());
  loop_.AdvanceBy(options_.start_delay + absl::Seconds(2));
  Attach(2, 101, "42", 1);
  loop_.RunUntilIdle();
  EXPECT_TRUE(StartsTo(2).empty()) << "the window is over";

  v1::TraceRequest by_pid;
  by_pid.mutable_selector()->add_pids(102);
  by_pid.mutable_selector()->set_job_id("8");
  *by_pid.mutable_duration() = Dur(absl::Seconds(5));
  Attach(3, 102, "8", 0);
  ASSERT_TRUE(core_->StartTrace(by_pid, std::make_shared<RecordingObserver>()).ok());
  Attach(4, 103, "8", 1);
  loop_.RunUntilIdle();
  EXPECT_TRUE(StartsTo(4).empty()) << "a selector with pids names its processes";

  v1::TraceRequest limited = JobRequest("9", absl::Seconds(5));
  limited.mutable_selector()->set_limit(1);
  Attach(5, 104, "9", 0);
  ASSERT_TRUE(core_->StartTrace(limited, std::make_shared<RecordingObserver>()).ok());
  Attach(6, 105, "9", 1);
  loop_.RunUntilIdle();
  EXPECT_TRUE(StartsTo(6).empty()) << "a limited selector has its processes";
}

TEST_F(TraceTest, AProcessAttachingDuringAnIterationWindowJoinsWithTheSameSteps) {
  AttachStepping(1, 100, "42", 0, StepsAt(998, clock_.Now(), absl::Milliseconds(2)));
  v1::TraceRequest req = JobRequest("42", absl::Seconds(60));
  req.set_iterations(2);
  req.set_step_roundup(500);
  auto obs = std::make_shared<RecordingObserver>();
  auto id = core_->StartTrace(req, obs);
  ASSERT_TRUE(id.ok());
  ASSERT_EQ(StartsTo(1)[0].start_step(), 1500u);
  loop_.AdvanceBy(absl::Seconds(1));
  // Its counter is far beyond: the library will say so; the daemon keeps
  // the trace's steps.
  AttachStepping(2, 101, "42", 1, StepsAt(5000, clock_.Now(), absl::Milliseconds(2)));
  loop_.RunUntilIdle();
  ASSERT_EQ(StartsTo(2).size(), 1u);
  EXPECT_EQ(StartsTo(2)[0].start_step(), 1500u);
  EXPECT_EQ(StartsTo(2)[0].iterations(), 2u);
  EXPECT_EQ(StartsTo(2)[0].start_time_unix_ns(), StartsTo(1)[0].start_time_unix_ns());
  EXPECT_EQ(StartsTo(2)[0].duration_ns(), StartsTo(1)[0].duration_ns()) << "the same bound";
  EXPECT_EQ(obs->events.back().progress().joined().current_step(), 5000u);
}

// A launcher with two ranks, each with a forked helper, in a fake /proc.
class TraceRolesTest : public TraceTest {
 protected:
  void SetUp() override {
    TraceTest::SetUp();
    proc_ = tmp_ + "/proc";
    for (auto [pid, ppid] : std::vector<std::pair<int, int>>{
             {100, 1}, {200, 100}, {201, 100}, {300, 200}, {301, 201}, {302, 201}}) {
      std::filesystem::create_directories(absl::StrCat(proc_, "/", pid));
      std::ofstream(absl::StrCat(proc_, "/", pid, "/stat"))
          << pid << " (python3) S " << ppid << " 1 1 0\n";
    }
    options_.proc_root = proc_;
    MakeCore();
  }
  std::string proc_;
};

TEST_F(TraceRolesTest, TracesWorkersListsRolesAndHelpersDoNotJoin) {
  Attach(1, 100, "9", -1);
  Attach(2, 200, "9", 0);
  Attach(3, 201, "9", 1);
  Attach(4, 300, "9", 0);
  auto listed = core_->ListProcesses({});
  ASSERT_TRUE(listed.ok());
  std::vector<v1::ProcessRole> roles;
  for (const auto& p : listed->processes()) roles.push_back(p.role());
  EXPECT_THAT(roles, ElementsAre(v1::PROCESS_ROLE_LAUNCHER, v1::PROCESS_ROLE_WORKER,
                                 v1::PROCESS_ROLE_WORKER, v1::PROCESS_ROLE_HELPER));
  EXPECT_EQ(listed->processes(1).ppid(), 100) << "from /proc";

  auto obs = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(core_->StartTrace(JobRequest("9", absl::Seconds(2)), obs).ok());
  EXPECT_TRUE(StartsTo(1).empty());
  EXPECT_EQ(StartsTo(2).size(), 1u);
  EXPECT_EQ(StartsTo(3).size(), 1u);
  EXPECT_TRUE(StartsTo(4).empty());
  // A helper forked by rank 1 while the trace runs is not a rank: it does
  // not join.
  Attach(5, 301, "9", 1);
  loop_.RunUntilIdle();
  EXPECT_TRUE(StartsTo(5).empty());
  // A process of the job started under the launcher while the trace runs
  // is a worker of its own rank: it joins.
  std::filesystem::create_directories(proc_ + "/202");
  std::ofstream(proc_ + "/202/stat") << "202 (python3) S 100 1 1 0\n";
  Attach(6, 202, "9", 2);
  loop_.RunUntilIdle();
  EXPECT_EQ(StartsTo(6).size(), 1u);
}

TEST_F(TraceRolesTest, NothingMatchedSaysWhatWasLeftOut) {
  Attach(1, 100, "9", -1);
  Attach(2, 200, "9", 0);
  v1::ipc::Hello loader = MakeHello(300, "9", 0);
  loader.add_labels("kind=loader");
  ASSERT_TRUE(core_->OnPeerHello(4, {300, 1000, 1000}, loader, nullptr).ok());

  v1::TraceRequest req;
  req.mutable_selector()->set_job_id("9");
  req.mutable_selector()->add_pids(300);
  v1::RankRange* r = req.mutable_selector()->add_ranks();
  r->set_first(5);
  r->set_last(6);
  *req.mutable_duration() = Dur(absl::Seconds(1));
  absl::Status st = core_->StartTrace(req, std::make_shared<RecordingObserver>()).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(st.message(),
            "no attached process matches job \"9\" and pids [300] and ranks 5-6 on host h1 (3 "
            "attached: job \"9\" x3)");

  // Only the helper has the label: it matches but is not a rank.
  v1::TraceRequest by_label;
  (*by_label.mutable_selector()->mutable_labels())["kind"] = "loader";
  *by_label.mutable_duration() = Dur(absl::Seconds(1));
  st = core_->StartTrace(by_label, std::make_shared<RecordingObserver>()).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(st.message(),
            "no attached process matches label kind=loader on host h1 (3 attached: job \"9\" x3; 1 "
            "matched but are launchers or helpers, which include_helpers selects)");
  by_label.mutable_selector()->set_include_helpers(true);
  auto obs = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(core_->StartTrace(by_label, obs).ok());
  ASSERT_EQ(Started(*obs).processes_size(), 1);
  EXPECT_EQ(Started(*obs).processes(0).pid(), 300);
  EXPECT_EQ(Started(*obs).processes(0).role(), v1::PROCESS_ROLE_HELPER);
}

TEST_F(TraceTest, ListProcessesShowsLabelsAndLiveSteps) {
  const absl::Time now = clock_.Now();
  v1::ipc::Hello hello = MakeHello(100, "42", 0);
  hello.set_protocol_minor(1);
  hello.add_labels("team=ml");
  hello.add_labels("k8s.pod=trainer-0");
  auto reading = StepsAt(41, now - absl::Seconds(1), absl::Milliseconds(250));
  ASSERT_TRUE(
      core_->OnPeerHello(1, {100, 1000, 1000}, hello, std::make_unique<FakeStepCounter>(reading))
          .ok());
  // A minor-0 Hello: no labels, no counter.
  Attach(2, 101, "42", 1);

  auto listed = core_->ListProcesses({});
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->processes_size(), 2);
  const v1::ProcessInfo& p = listed->processes(0);
  EXPECT_EQ(p.labels().at("team"), "ml");
  EXPECT_EQ(p.labels().at("k8s.pod"), "trainer-0");
  ASSERT_TRUE(p.has_current_step());
  EXPECT_EQ(p.current_step(), 41u);
  EXPECT_EQ(FromTs(p.last_step_time()), now - absl::Seconds(1));
  EXPECT_EQ(FromDur(p.step_period()), absl::Milliseconds(250));
  EXPECT_EQ(p.role(), v1::PROCESS_ROLE_WORKER);
  const v1::ProcessInfo& q = listed->processes(1);
  EXPECT_FALSE(q.has_current_step());
  EXPECT_FALSE(q.has_last_step_time());
  EXPECT_FALSE(q.has_step_period());
  EXPECT_TRUE(q.labels().empty());

  reading->current_step = 42;  // read live
  reading->period.reset();
  listed = core_->ListProcesses({});
  EXPECT_EQ(listed->processes(0).current_step(), 42u);
  EXPECT_FALSE(listed->processes(0).has_step_period());

  v1::ListProcessesRequest by_label;
  (*by_label.mutable_selector()->mutable_labels())["team"] = "ml";
  ASSERT_EQ(core_->ListProcesses(by_label)->processes_size(), 1);
  v1::ListProcessesRequest bad;
  v1::RankRange* r = bad.mutable_selector()->add_ranks();
  r->set_first(3);
  r->set_last(1);
  EXPECT_EQ(core_->ListProcesses(bad).status().code(), absl::StatusCode::kInvalidArgument);

  // A broken label refuses the Hello.
  v1::ipc::Hello broken = MakeHello(102, "42", 1);
  broken.add_labels("no-equals-sign");
  EXPECT_EQ(core_->OnPeerHello(3, {102, 1000, 1000}, broken, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->GetStatus().attached_processes(), 2u);
  EXPECT_EQ(core_->GetStatus().ipc_protocol_minor(), kIpcProtocolMinor);
}

// Recent step durations are listed only on request (anomaly rules ask;
// `gpuctl ps` does not).
TEST_F(TraceTest, StepDurationsAreListedOnRequest) {
  auto reading = StepsAt(9, clock_.Now(), absl::Milliseconds(150));
  reading->durations_total = 300;
  reading->recent_durations = {absl::Milliseconds(100), absl::Milliseconds(200)};
  AttachStepping(1, 100, "42", 0, reading);
  auto plain = core_->ListProcesses({});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->processes(0).step_durations_total(), 0u);
  EXPECT_TRUE(plain->processes(0).recent_step_ns().empty());
  v1::ListProcessesRequest request;
  request.set_include_step_durations(true);
  auto with = core_->ListProcesses(request);
  ASSERT_TRUE(with.ok());
  EXPECT_EQ(with->processes(0).step_durations_total(), 300u);
  EXPECT_THAT(with->processes(0).recent_step_ns(), ElementsAre(100'000'000, 200'000'000));
}

TEST_F(TraceTest, TheStepCounterViewLivesAsLongAsTheProcessIsAttached) {
  auto reading = StepsAt(1, clock_.Now(), absl::Seconds(1));
  AttachStepping(1, 100, "42", 0, reading);
  EXPECT_EQ(reading.use_count(), 2) << "held by the view the core keeps";
  core_->OnPeerGone(1, /*clean=*/true, "exited");
  EXPECT_EQ(reading.use_count(), 1) << "released (unmapped) with the process";

  v1::ipc::Hello refused = MakeHello(101, "42", 0);
  refused.add_labels("bad key=x");
  EXPECT_FALSE(
      core_->OnPeerHello(2, {101, 1000, 1000}, refused, std::make_unique<FakeStepCounter>(reading))
          .ok());
  EXPECT_EQ(reading.use_count(), 1) << "a refused Hello's counter is released at once";
}

TEST_F(TraceTest, TracesByRankAndLabelAndDescribesTheSelector) {
  v1::ipc::Hello a = MakeHello(100, "42", 0);
  a.add_labels("team=ml");
  ASSERT_TRUE(core_->OnPeerHello(1, {100, 1000, 1000}, a, nullptr).ok());
  v1::ipc::Hello b = MakeHello(101, "42", 1);
  b.add_labels("team=ml");
  ASSERT_TRUE(core_->OnPeerHello(2, {101, 1000, 1000}, b, nullptr).ok());
  Attach(3, 102, "42", 0);  // no label
  v1::TraceRequest req;
  v1::RankRange* r = req.mutable_selector()->add_ranks();
  r->set_first(0);
  r->set_last(0);
  (*req.mutable_selector()->mutable_labels())["team"] = "ml";
  *req.mutable_duration() = Dur(absl::Seconds(1));
  auto obs = std::make_shared<RecordingObserver>();
  auto id = core_->StartTrace(req, obs);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(StartsTo(1).size(), 1u);
  EXPECT_TRUE(StartsTo(2).empty());
  EXPECT_TRUE(StartsTo(3).empty());
  core_->CancelTrace(*id, {});
  RunAll();
  auto manifest = store_->GetManifest(*id);
  ASSERT_TRUE(manifest.ok());
  EXPECT_EQ(manifest->selector(), "rank 0 and label team=ml");

  v1::TraceRequest bad = req;
  r = bad.mutable_selector()->add_ranks();
  r->set_first(5);
  r->set_last(2);
  absl::Status st = core_->StartTrace(bad, obs).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "rank range 5-2 is empty: its first rank exceeds its last");
}

}  // namespace
}  // namespace gpuctl::daemon
