// Anomaly rules driven through the core on a fake clock: a stall becomes a
// capture of the job's stepping processes under the derived trace id, with
// the skips recorded, and hosts seeing the same event agree on the id.
#include <memory>
#include <string>
#include <vector>

#include "daemon/core/testing/core_test_fixture.h"
#include "daemon/scheduler/schedule_driver.h"
#include "daemon/scheduler/slot_decision.h"
#include "daemon/scheduler/test_rules_for_test.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon::scheduler {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kDriverStep = absl::Milliseconds(100);

class AnomalyDriverTest : public DaemonCoreTest {
 protected:
  std::unique_ptr<ScheduleDriver> MakeDriver(DaemonCore* core, const ScheduleRule& rule) {
    const ScheduleOptions options{.seed = "fleet", .rules = {rule}, .max_duty_cycle = 1};
    return std::make_unique<ScheduleDriver>(
        options, ScheduleDriver::Deps{
                     .clock = &clock_, .loop = &loop_, .core = core, .free_store_bytes = [] {
                       return uint64_t{1} << 40;
                     }});
  }

  // A process at step 50 that marked its steps every kDriverStep until now.
  std::shared_ptr<StepReading> Stepping() {
    auto reading = std::make_shared<StepReading>();
    reading->has_step = true;
    reading->current_step = 50;
    reading->last_step_time = clock_.Now();
    reading->durations_total = 50;
    reading->recent_durations.assign(50, kDriverStep);
    return reading;
  }

  // The process marks its steps up to `until`, every kDriverStep.
  static void StepUntil(StepReading& r, absl::Time until) {
    while (*r.last_step_time + kDriverStep <= until) {
      *r.last_step_time += kDriverStep;
      ++r.current_step;
      ++r.durations_total;
      r.recent_durations.push_back(kDriverStep);
    }
  }

  // One second of the loop with `readings` stepping along (their marks
  // are in place when the poll at its end reads them).
  void SecondOfSteps(const std::vector<StepReading*>& readings) {
    for (StepReading* r : readings) StepUntil(*r, clock_.Now() + absl::Seconds(1));
    loop_.AdvanceBy(absl::Seconds(1));
    RunAll();
  }
};

TEST_F(AnomalyDriverTest, AStallIsCapturedWithWhatWasSeenAndTheSkipsRecorded) {
  const ScheduleRule rule = AnomalyRuleForTest(/*window_steps=*/0);
  std::shared_ptr<StepReading> steps = AttachStepping(1, 100, "42", 0, Stepping());
  Attach(2, 101, "42", 1);  // shares no step counter
  std::unique_ptr<ScheduleDriver> driver = MakeDriver(core_.get(), rule);
  driver->Start();
  for (int i = 0; i < 5; ++i) SecondOfSteps({steps.get()});
  EXPECT_TRUE(StartsTo(1).empty());
  EXPECT_TRUE(driver->events().empty());
  EXPECT_EQ(driver->wakeups(), 5u) << "one wake-up per step poll";

  const uint64_t stalled = steps->current_step;
  loop_.AdvanceBy(absl::Seconds(1));  // no mark: 1 s into a 100 ms step
  RunAll();
  const std::vector<v1::ipc::StartCapture> starts = StartsTo(1);
  ASSERT_EQ(starts.size(), 1u);
  const AnomalyDecision d = DecideAnomaly("fleet", rule, "42", stalled,
                                          stalled + ScheduleDriver::kStepMargin, clock_.Now());
  EXPECT_EQ(starts[0].trace_id(), d.trace_id);
  EXPECT_EQ(starts[0].duration_ns(), absl::ToInt64Nanoseconds(rule.window));
  EXPECT_TRUE(StartsTo(2).empty()) << "the process without a counter is left out";

  ASSERT_EQ(driver->events().size(), 2u);
  const ScheduleDriver::Event& skip = driver->events()[0];
  EXPECT_EQ(skip.outcome, SlotOutcome::kNoStepCounter);
  EXPECT_EQ(skip.pid, 101);
  const ScheduleDriver::Event& capture = driver->events()[1];
  EXPECT_EQ(capture.outcome, SlotOutcome::kCapture);
  EXPECT_EQ(capture.trace_id, d.trace_id);
  EXPECT_EQ(capture.slot, static_cast<int64_t>(stalled / 100));
  EXPECT_EQ(capture.pid, 100);
  EXPECT_EQ(capture.anomaly,
            absl::StrCat("slow step ", stalled, " of pid 100 (rank 0): 1s so far, median 100ms"));
  EXPECT_TRUE(capture.error.empty()) << capture.error;

  // Within the cool-down a second stall is a recorded skip.
  for (int i = 0; i < 3; ++i) SecondOfSteps({steps.get()});
  loop_.AdvanceBy(absl::Seconds(2));
  RunAll();
  EXPECT_EQ(StartsTo(1).size(), 1u);
  ASSERT_EQ(driver->events().size(), 3u);
  EXPECT_EQ(driver->events()[2].outcome, SlotOutcome::kCoolDown);
  EXPECT_TRUE(IsLocalOutcome(SlotOutcome::kCoolDown));
  driver.reset();
  loop_.AdvanceBy(absl::Minutes(1));
  RunAll();
}

TEST_F(AnomalyDriverTest, TheDailyCapCountsThisHostsCaptures) {
  ScheduleRule rule = AnomalyRuleForTest(/*window_steps=*/0);
  rule.daily_cap = 1;
  rule.anomaly.cooldown = absl::Seconds(10);
  std::shared_ptr<StepReading> steps = AttachStepping(1, 100, "42", 0, Stepping());
  std::unique_ptr<ScheduleDriver> driver = MakeDriver(core_.get(), rule);
  driver->Start();
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 20; ++i) SecondOfSteps({steps.get()});
    loop_.AdvanceBy(absl::Seconds(1));
    RunAll();
  }
  EXPECT_EQ(StartsTo(1).size(), 1u);
  ASSERT_EQ(driver->events().size(), 2u);
  EXPECT_EQ(driver->events()[1].outcome, SlotOutcome::kHostDailyCap);
  driver.reset();
  loop_.AdvanceBy(absl::Minutes(1));
  RunAll();
}

// Two hosts, one rank each: both ranks stall in the same step (a
// collective waits for a straggler), each host decides for itself and
// both request the same steps under the same trace id.
TEST_F(AnomalyDriverTest, HostsSeeingTheSameStallCaptureUnderOneId) {
  struct Other {
    Other(const std::string& dir, const CoreOptions& options, FakeClock* clock,
          FakeTaskRunner* loop, ManualExecutor* worker)
        : store(*LocalTraceStore::Create(dir)),
          core(DaemonCore::Create(options, {clock, loop, worker, store.get(), &peers})) {}
    FakePeerChannel peers;
    std::unique_ptr<LocalTraceStore> store;
    std::unique_ptr<DaemonCore> core;
  } other(tmp_ + "/traces-b", options_, &clock_, &loop_, &worker_);
  const ScheduleRule rule = AnomalyRuleForTest(/*window_steps=*/5);
  std::shared_ptr<StepReading> a = AttachStepping(1, 100, "42", 0, Stepping());
  std::shared_ptr<StepReading> b = Stepping();
  v1::ipc::Hello hello = MakeHello(200, "42", 1);
  hello.set_protocol_minor(1);
  hello.set_step_counter(true);
  hello.set_capabilities(hello.capabilities() | v1::ipc::CAPABILITY_STEP_COUNTER);
  ASSERT_TRUE(other.core
                  ->OnPeerHello(1, {200, 1000, 1000}, hello,
                                std::make_unique<::gpuctl::testing::FakeStepCounter>(b))
                  .ok());
  std::unique_ptr<ScheduleDriver> da = MakeDriver(core_.get(), rule);
  std::unique_ptr<ScheduleDriver> db = MakeDriver(other.core.get(), rule);
  da->Start();
  db->Start();
  for (int i = 0; i < 3; ++i) SecondOfSteps({a.get(), b.get()});
  loop_.AdvanceBy(absl::Seconds(2));
  RunAll();
  const std::vector<v1::ipc::StartCapture> on_a = StartsTo(1);
  std::vector<v1::ipc::StartCapture> on_b;
  for (const auto& s : other.peers.SentTo(1)) {
    if (s.message.has_start_capture()) on_b.push_back(s.message.start_capture());
  }
  ASSERT_EQ(on_a.size(), 1u);
  ASSERT_EQ(on_b.size(), 1u);
  EXPECT_EQ(on_a[0].trace_id(), on_b[0].trace_id());
  EXPECT_EQ(on_a[0].start_step(), on_b[0].start_step());
  EXPECT_EQ(on_a[0].start_step() % 100, 0u);
  EXPECT_EQ(on_a[0].iterations(), 5u);
  EXPECT_THAT(da->events().back().anomaly, HasSubstr("of pid 100 (rank 0)"));
  EXPECT_THAT(db->events().back().anomaly, HasSubstr("of pid 200 (rank 1)"));
  da.reset();
  db.reset();
  RunAll();
}

}  // namespace
}  // namespace gpuctl::daemon::scheduler
