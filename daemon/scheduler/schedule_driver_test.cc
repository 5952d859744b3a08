#include "daemon/scheduler/schedule_driver.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/core/proto_time.h"
#include "daemon/core/testing/core_test_fixture.h"
#include "daemon/scheduler/slot_decision.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon::scheduler {
namespace {

// A second daemon ("host") on the same fake clock and loop as the
// fixture's core: its own peers and store.
struct SecondHost {
  SecondHost(const std::string& dir, const CoreOptions& options, FakeClock* clock,
             FakeTaskRunner* loop, ManualExecutor* worker)
      : store(*LocalTraceStore::Create(dir)),
        core(DaemonCore::Create(options, {clock, loop, worker, store.get(), &peers})) {}
  FakePeerChannel peers;
  std::unique_ptr<LocalTraceStore> store;
  std::unique_ptr<DaemonCore> core;
};

class ScheduleDriverTest : public DaemonCoreTest {
 protected:
  static ScheduleOptions EveryMinute(double probability) {
    ScheduleRule rule;
    rule.name = "minutely";
    rule.selector.set_job_id("42");
    rule.probability = probability;
    rule.period = absl::Minutes(1);
    rule.window = absl::Seconds(5);
    return ScheduleOptions{.seed = "fleet", .rules = {rule}, .max_duty_cycle = 1};
  }

  std::unique_ptr<ScheduleDriver> MakeDriver(DaemonCore* core, const ScheduleOptions& options) {
    return std::make_unique<ScheduleDriver>(
        options,
        ScheduleDriver::Deps{
            .clock = &clock_,
            .loop = &loop_,
            .core = core,
            .free_store_bytes = [] { return uint64_t{1} << 40; },
            .on_decision =
                [this](absl::string_view rule, SlotOutcome outcome) {
                  ++decisions_[{std::string(rule), std::string(SlotOutcomeLabel(outcome))}];
                }});
  }
  // on_decision's calls, by rule and outcome label.
  std::map<std::pair<std::string, std::string>, int> decisions_;

  // Plays the libraries: each StartCapture not answered yet gets a result
  // once its window is over.
  void AnswerCaptures(DaemonCore* core, FakePeerChannel* peers, PeerId peer, int pid) {
    size_t& answered = answered_[{core, peer}];
    std::vector<v1::ipc::StartCapture> starts;
    for (const auto& s : peers->SentTo(peer)) {
      if (s.message.has_start_capture()) starts.push_back(s.message.start_capture());
    }
    while (answered < starts.size()) {
      const v1::ipc::StartCapture& start = starts[answered];
      const absl::Time end = absl::FromUnixNanos(start.start_time_unix_ns() + start.duration_ns());
      if (clock_.Now() < end) break;
      v1::ipc::CaptureResult result;
      result.set_trace_id(start.trace_id());
      result.set_status(v1::CAPTURE_STATUS_OK);
      result.set_transport(v1::ipc::PAYLOAD_TRANSPORT_MEMFD);
      std::vector<uint8_t> bytes = Payload(pid, start);
      result.set_payload_size(bytes.size());
      core->OnCaptureResult(peer, result, std::make_unique<VectorPayload>(std::move(bytes)));
      ++answered;
    }
  }

  static std::vector<v1::ipc::StartCapture> Starts(FakePeerChannel& peers, PeerId peer) {
    std::vector<v1::ipc::StartCapture> out;
    for (const auto& s : peers.SentTo(peer)) {
      if (s.message.has_start_capture()) out.push_back(s.message.start_capture());
    }
    return out;
  }

  // A slot, 10 or more after the clock's, whose window for job 42 starts
  // at least `room` after the slot's start.
  int64_t SlotWithRoomBefore(const ScheduleRule& rule, absl::Duration room) {
    int64_t slot = SlotOf(rule.period, clock_.Now()) + 10;
    while (DecideSlot("fleet", rule, "42", slot).start - SlotStart(rule.period, slot) < room) {
      ++slot;
    }
    return slot;
  }

  std::map<std::pair<DaemonCore*, PeerId>, size_t> answered_;
};

// Two daemons with the same schedule, each with one rank of job 42, start
// the same windows under the same trace ids, with no message between them,
// and only the slots the hash draws.
TEST_F(ScheduleDriverTest, HostsOfAJobCaptureTheSameWindowsUnderOneId) {
  SecondHost other(tmp_ + "/traces-b", options_, &clock_, &loop_, &worker_);
  Attach(1, 100, "42", 0);
  ASSERT_TRUE(other.core->OnPeerHello(1, {200, 1000, 1000}, MakeHello(200, "42", 1), nullptr).ok());
  Attach(2, 300, "7", 0);  // another job: never selected
  const ScheduleOptions options = EveryMinute(0.5);
  std::unique_ptr<ScheduleDriver> a = MakeDriver(core_.get(), options);
  std::unique_ptr<ScheduleDriver> b = MakeDriver(other.core.get(), options);
  a->Start();
  b->Start();
  const absl::Time begin = clock_.Now();
  constexpr int kMinutes = 30;
  for (int s = 0; s < kMinutes * 60; ++s) {
    loop_.AdvanceBy(absl::Seconds(1));
    RunAll();
    AnswerCaptures(core_.get(), &peers_, 1, 100);
    AnswerCaptures(other.core.get(), &other.peers, 1, 200);
    RunAll();
  }
  std::vector<std::string> expected;
  std::vector<int64_t> expected_slots;
  const int64_t first = SlotOf(absl::Minutes(1), begin);
  for (int64_t slot = first; slot < first + kMinutes; ++slot) {
    SlotDecision d = DecideSlot("fleet", options.rules[0], "42", slot);
    if (d.sampled && d.start > begin) {
      expected.push_back(d.trace_id);
      expected_slots.push_back(slot);
    }
  }
  ASSERT_GT(expected.size(), 5u);
  const std::vector<v1::ipc::StartCapture> on_a = Starts(peers_, 1);
  const std::vector<v1::ipc::StartCapture> on_b = Starts(other.peers, 1);
  ASSERT_EQ(on_a.size(), expected.size());
  ASSERT_EQ(on_b.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(on_a[i].trace_id(), expected[i]);
    EXPECT_EQ(on_b[i].trace_id(), expected[i]);
    EXPECT_EQ(on_a[i].start_time_unix_ns(), on_b[i].start_time_unix_ns());
    EXPECT_EQ(on_a[i].duration_ns(), absl::ToInt64Nanoseconds(absl::Seconds(5)));
    // Each host stored its rank's result under the shared id.
    EXPECT_TRUE(store_->Open(expected[i], "h1-rank0-pid100.json.gz").ok()) << expected[i];
    EXPECT_TRUE(other.store->Open(expected[i], "h1-rank1-pid200.json.gz").ok()) << expected[i];
    // Both manifests say which rule and slot drew the trace, with its
    // weight and the schedule's fingerprint.
    for (TraceStore* store :
         {static_cast<TraceStore*>(store_.get()), static_cast<TraceStore*>(other.store.get())}) {
      absl::StatusOr<v1::TraceManifest> manifest = store->GetManifest(expected[i]);
      ASSERT_TRUE(manifest.ok()) << manifest.status();
      const v1::TraceTrigger& trigger = manifest->trigger();
      EXPECT_EQ(trigger.kind(), v1::TRIGGER_KIND_SCHEDULED);
      EXPECT_EQ(trigger.scheduled().rule(), "minutely");
      EXPECT_EQ(trigger.scheduled().slot(), expected_slots[i]);
      EXPECT_EQ(trigger.scheduled().period().seconds(), 60);
      EXPECT_EQ(trigger.scheduled().probability(), 0.5);
      EXPECT_EQ(trigger.scheduled().weight(), 2.0);
      EXPECT_EQ(trigger.scheduled().schedule_fingerprint(), a->fingerprint());
    }
  }
  EXPECT_TRUE(Starts(peers_, 2).empty());
  // It woke at the minute boundaries and the capture requests, no more.
  EXPECT_LE(a->wakeups(), static_cast<uint64_t>(kMinutes + expected.size()));
  EXPECT_EQ(a->fingerprint(), b->fingerprint());
  a.reset();
  b.reset();
  RunAll();
}

// The preview a daemon gives before the fact lists exactly the windows
// its schedule then captures, under the same ids; GetSchedule reports
// the rule, its next slots, the captures and the budget use.
TEST_F(ScheduleDriverTest, PreviewListsWhatIsThenCaptured) {
  ScheduleOptions options = EveryMinute(0.5);
  options.rules[0].daily_cap = 6;
  options.capture_time_per_day = absl::Hours(1);
  Attach(1, 100, "42", 0);
  std::unique_ptr<ScheduleDriver> driver = MakeDriver(core_.get(), options);
  driver->Start();
  constexpr int kMinutes = 30;
  v1::GetScheduleRequest request;
  request.set_preview_job("42");
  request.mutable_preview_duration()->set_seconds(int64_t{kMinutes} * 60);
  absl::StatusOr<v1::GetScheduleResponse> before = driver->GetSchedule(request);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(driver->Preview(request)(*before).ok());
  std::vector<std::string> previewed;
  for (const v1::PreviewSlot& p : before->preview()) {
    if (p.outcome() == "capture") previewed.push_back(p.trace_id());
  }
  ASSERT_GT(previewed.size(), 2u);

  for (int s = 0; s < kMinutes * 60; ++s) {
    loop_.AdvanceBy(absl::Seconds(1));
    RunAll();
    AnswerCaptures(core_.get(), &peers_, 1, 100);
    RunAll();
  }
  std::vector<std::string> captured;
  for (const v1::ipc::StartCapture& start : Starts(peers_, 1)) captured.push_back(start.trace_id());
  EXPECT_EQ(captured, previewed);

  absl::StatusOr<v1::GetScheduleResponse> after = driver->GetSchedule({});
  ASSERT_TRUE(after.ok()) << after.status();
  std::map<std::string, int> reported;  // the events' outcomes as metric labels
  EXPECT_TRUE(after->enabled());
  EXPECT_EQ(after->fingerprint(), driver->fingerprint());
  ASSERT_EQ(after->rules_size(), 1);
  const v1::ScheduleRuleInfo& rule = after->rules(0);
  EXPECT_EQ(rule.name(), "minutely");
  EXPECT_EQ(rule.selector(), "job \"42\"");
  EXPECT_DOUBLE_EQ(rule.duty_cycle(), 0.5 * 5 / 60);
  ASSERT_EQ(rule.next_slots_size(), 3);
  EXPECT_EQ(rule.next_slots(0).seconds() % 60, 0);
  EXPECT_GT(absl::FromUnixSeconds(rule.next_slots(0).seconds()), clock_.Now());
  int captures = 0;
  int capped = 0;
  for (const v1::ScheduleEvent& e : after->events()) {
    captures += e.captured();
    capped += e.outcome() == "daily cap reached";
    ++reported[e.captured() ? "capture" : e.outcome() == "daily cap reached" ? "daily_cap" : "?"];
    EXPECT_FALSE(e.local());
  }
  EXPECT_EQ(captures, static_cast<int>(previewed.size()));
  EXPECT_EQ(after->captures_today() + after->skips_today(),
            static_cast<uint32_t>(after->events_size()));
  // Window time counts from the decision; the last slot's may be ahead.
  EXPECT_GE(after->capture_time_today().seconds(), 5 * captures);
  EXPECT_LE(after->capture_time_today().seconds(), 5 * (captures + 1));
  EXPECT_LE(captures, 6);
  if (captures == 6) {
    EXPECT_GT(capped, 0);
  }
  // Every event was told to the metrics as it happened, and so were the
  // slots the hash did not draw (about half of the 30 minutes').
  for (const auto& [outcome, count] : reported) {
    EXPECT_EQ((decisions_[{"minutely", outcome}]), count) << outcome;
  }
  EXPECT_GT((decisions_[{"minutely", "not_sampled"}]), 5);
  EXPECT_EQ(after->events_size() + (decisions_[{"minutely", "not_sampled"}]), kMinutes + 1);
  driver.reset();
  RunAll();
}

// A daemon restarted in the middle of a slot captures that slot's window
// when it is still ahead, under the id the others use, though its
// libraries re-attach only after it started.
TEST_F(ScheduleDriverTest, StartingMidSlotCapturesWhatIsStillAhead) {
  const ScheduleOptions options = EveryMinute(1.0);
  const int64_t slot = SlotWithRoomBefore(options.rules[0], absl::Seconds(5));
  const SlotDecision d = DecideSlot("fleet", options.rules[0], "42", slot);
  clock_.Set(d.slot_start + absl::Seconds(1));
  std::unique_ptr<ScheduleDriver> driver = MakeDriver(core_.get(), options);
  driver->Start();
  RunAll();
  loop_.AdvanceBy(absl::Seconds(1));
  Attach(1, 100, "42", 0);
  RunAll();
  loop_.AdvanceBy(d.start - clock_.Now());
  RunAll();
  const std::vector<v1::ipc::StartCapture> starts = Starts(peers_, 1);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].trace_id(), d.trace_id);
  EXPECT_EQ(starts[0].start_time_unix_ns(), absl::ToUnixNanos(d.start));
  driver.reset();
  loop_.AdvanceBy(absl::Minutes(1));
  RunAll();
}

// A job whose process attaches mid-slot, after its host decided the
// boundary, gets the same trace id and start as a host that decided it at
// the boundary.
TEST_F(ScheduleDriverTest, AJobAttachingMidSlotJoinsTheWindowOfTheOtherHosts) {
  SecondHost other(tmp_ + "/traces-b", options_, &clock_, &loop_, &worker_);
  const ScheduleOptions options = EveryMinute(1.0);
  const int64_t slot = SlotWithRoomBefore(options.rules[0], absl::Seconds(5));
  const SlotDecision d = DecideSlot("fleet", options.rules[0], "42", slot);
  clock_.Set(d.slot_start - absl::Seconds(5));
  Attach(1, 100, "42", 0);
  std::unique_ptr<ScheduleDriver> a = MakeDriver(core_.get(), options);
  std::unique_ptr<ScheduleDriver> b = MakeDriver(other.core.get(), options);
  a->Start();
  b->Start();
  loop_.AdvanceBy(absl::Seconds(5) + absl::Seconds(2));
  RunAll();
  ASSERT_TRUE(other.core->OnPeerHello(1, {200, 1000, 1000}, MakeHello(200, "42", 1), nullptr).ok());
  RunAll();
  loop_.AdvanceBy(d.start - clock_.Now());
  RunAll();
  const std::vector<v1::ipc::StartCapture> on_a = Starts(peers_, 1);
  const std::vector<v1::ipc::StartCapture> on_b = Starts(other.peers, 1);
  ASSERT_EQ(on_a.size(), 1u);
  ASSERT_EQ(on_b.size(), 1u);
  EXPECT_EQ(on_a[0].trace_id(), d.trace_id);
  EXPECT_EQ(on_b[0].trace_id(), d.trace_id);
  EXPECT_EQ(on_a[0].start_time_unix_ns(), absl::ToUnixNanos(d.start));
  EXPECT_EQ(on_b[0].start_time_unix_ns(), absl::ToUnixNanos(d.start));
  // A second process of the job, attaching later, adds no second capture.
  ASSERT_TRUE(other.core->OnPeerHello(2, {201, 1000, 1000}, MakeHello(201, "42", 2), nullptr).ok());
  RunAll();
  EXPECT_EQ(b->events().size(), 1u);
  a.reset();
  b.reset();
  loop_.AdvanceBy(absl::Minutes(1));
  RunAll();
}

// A job whose process attaches after its slot's window started captures
// nothing of it and records why, under the slot's trace id.
TEST_F(ScheduleDriverTest, AJobAttachingAfterTheWindowStartRecordsASkip) {
  const ScheduleOptions options = EveryMinute(1.0);
  const int64_t slot = SlotOf(absl::Minutes(1), clock_.Now()) + 10;
  const SlotDecision d = DecideSlot("fleet", options.rules[0], "42", slot);
  ASSERT_LT(d.start + absl::Seconds(1), SlotStart(absl::Minutes(1), slot + 1));
  clock_.Set(d.slot_start);
  std::unique_ptr<ScheduleDriver> driver = MakeDriver(core_.get(), options);
  driver->Start();
  loop_.AdvanceBy(d.start - clock_.Now() + absl::Milliseconds(500));
  RunAll();
  EXPECT_TRUE(driver->events().empty());
  Attach(1, 100, "42", 0);
  RunAll();
  EXPECT_TRUE(Starts(peers_, 1).empty());
  ASSERT_EQ(driver->events().size(), 1u);
  EXPECT_EQ(driver->events()[0].outcome, SlotOutcome::kWindowPassed);
  EXPECT_EQ(driver->events()[0].slot, slot);
  EXPECT_EQ(driver->events()[0].trace_id, d.trace_id);
  driver.reset();
  RunAll();
}

// An on-demand trace of a process a scheduled window holds has priority:
// the scheduled capture is cancelled on it, says so in its result and in
// the schedule's events, and the on-demand trace starts.
TEST_F(ScheduleDriverTest, AnOnDemandTracePreemptsAScheduledCapture) {
  const ScheduleOptions options = EveryMinute(1.0);
  const int64_t slot = SlotWithRoomBefore(options.rules[0], absl::Seconds(5));
  const SlotDecision d = DecideSlot("fleet", options.rules[0], "42", slot);
  clock_.Set(d.slot_start);
  Attach(1, 100, "42", 0);
  std::unique_ptr<ScheduleDriver> driver = MakeDriver(core_.get(), options);
  driver->Start();
  loop_.AdvanceBy(d.start - clock_.Now() + absl::Seconds(1));
  RunAll();
  ASSERT_EQ(Starts(peers_, 1).size(), 1u);

  auto on_demand = std::make_shared<RecordingObserver>();
  absl::StatusOr<std::string> id = Trace("42", absl::Seconds(1), on_demand);
  ASSERT_TRUE(id.ok()) << id.status();
  RunAll();
  const std::vector<v1::ipc::StartCapture> starts = Starts(peers_, 1);
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[1].trace_id(), *id);
  const std::vector<v1::ipc::CancelCapture> cancels = CancelsTo(1);
  ASSERT_EQ(cancels.size(), 1u);
  EXPECT_EQ(cancels[0].trace_id(), d.trace_id);
  EXPECT_THAT(cancels[0].reason(), ::testing::HasSubstr(*id));

  ASSERT_EQ(driver->events().size(), 2u);
  const ScheduleDriver::Event& preempted = driver->events()[1];
  EXPECT_EQ(preempted.outcome, SlotOutcome::kPreempted);
  EXPECT_TRUE(IsLocalOutcome(preempted.outcome));
  EXPECT_EQ(preempted.trace_id, d.trace_id);
  EXPECT_EQ(preempted.pid, 100);
  EXPECT_EQ(preempted.error, absl::StrCat(kPreemptedByOnDemand, *id));
  absl::StatusOr<v1::GetScheduleResponse> report = driver->GetSchedule({});
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->events_size(), 2);
  EXPECT_EQ(report->events(1).outcome(), "preempted by an on-demand trace (local)");

  // A second on-demand trace meanwhile is refused as before: on-demand
  // traces do not preempt one another.
  auto second = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(Trace("42", absl::Seconds(1), second).ok());
  RunAll();
  ASSERT_NE(second->ResultFor(100), nullptr);
  EXPECT_EQ(second->ResultFor(100)->status(), v1::CAPTURE_STATUS_BUSY);
  driver.reset();
  loop_.AdvanceBy(absl::Minutes(1));
  RunAll();
}

// A scheduled capture that finds one of the job's processes held by an
// on-demand trace records a skip naming that process and why; the job's
// other process is captured under the slot's id.
TEST_F(ScheduleDriverTest, AProcessBusyWhenTheWindowOpensIsRecordedAsASkip) {
  const ScheduleOptions options = EveryMinute(1.0);
  const int64_t slot = SlotWithRoomBefore(options.rules[0], absl::Seconds(5));
  const SlotDecision d = DecideSlot("fleet", options.rules[0], "42", slot);
  clock_.Set(d.slot_start - absl::Seconds(1));
  Attach(1, 100, "42", 0);
  Attach(2, 101, "42", 1);
  auto on_demand = std::make_shared<RecordingObserver>();
  v1::TraceRequest held;
  held.mutable_selector()->add_pids(100);
  *held.mutable_duration() = ToProtoDuration(absl::Minutes(5));
  v1::TraceTrigger trigger;
  trigger.set_kind(v1::TRIGGER_KIND_ON_DEMAND);
  absl::StatusOr<std::string> id = core_->StartTrace(held, trigger, on_demand);
  ASSERT_TRUE(id.ok()) << id.status();
  RunAll();
  std::unique_ptr<ScheduleDriver> driver = MakeDriver(core_.get(), options);
  driver->Start();
  loop_.AdvanceBy(d.start - clock_.Now());
  RunAll();
  const std::vector<v1::ipc::StartCapture> scheduled = Starts(peers_, 2);
  ASSERT_EQ(scheduled.size(), 1u);
  EXPECT_EQ(scheduled[0].trace_id(), d.trace_id);

  // The slot under way when the driver started is decided too; the slot
  // examined here is `slot`.
  std::vector<ScheduleDriver::Event> of_slot;
  for (const ScheduleDriver::Event& e : driver->events()) {
    if (e.slot == slot) of_slot.push_back(e);
  }
  ASSERT_EQ(of_slot.size(), 2u);
  EXPECT_EQ(of_slot[0].outcome, SlotOutcome::kCapture);
  const ScheduleDriver::Event& busy = of_slot[1];
  EXPECT_EQ(busy.outcome, SlotOutcome::kProcessBusy);
  EXPECT_TRUE(IsLocalOutcome(busy.outcome));
  EXPECT_EQ(busy.pid, 100);
  EXPECT_EQ(busy.trace_id, d.trace_id);
  EXPECT_EQ(busy.error, "already capturing trace " + *id);
  EXPECT_EQ((decisions_[{"minutely", "process_busy"}]), 1);
  absl::StatusOr<v1::GetScheduleResponse> report = driver->GetSchedule({});
  ASSERT_TRUE(report.ok());
  const v1::ScheduleEvent& shown = report->events(report->events_size() - 1);
  EXPECT_EQ(shown.pid(), 100);
  EXPECT_FALSE(shown.captured());
  EXPECT_TRUE(shown.local());
  EXPECT_THAT(shown.outcome(), ::testing::HasSubstr("process busy"));
  driver.reset();
  loop_.AdvanceBy(absl::Minutes(10));
  RunAll();
}

// A daemon whose schedule runs behind the clock its trace windows use asks
// for a window already started: the core refuses it, and the schedule
// records the refusal as its own outcome with the core's error, not as a
// capture.
TEST_F(ScheduleDriverTest, ARefusedRequestIsRecordedAsRefused) {
  const ScheduleOptions options = EveryMinute(1.0);
  const int64_t slot = SlotWithRoomBefore(options.rules[0], absl::Seconds(5));
  const SlotDecision d = DecideSlot("fleet", options.rules[0], "42", slot);
  clock_.Set(d.slot_start - absl::Seconds(1));
  Attach(1, 100, "42", 0);
  OffsetClock late(&clock_, -absl::Milliseconds(2500));
  ScheduleDriver driver(options,
                        ScheduleDriver::Deps{.clock = &late,
                                             .loop = &loop_,
                                             .core = core_.get(),
                                             .free_store_bytes = [] { return uint64_t{1} << 40; },
                                             .on_decision = nullptr});
  driver.Start();
  loop_.AdvanceBy(d.start - clock_.Now() + absl::Seconds(3));
  RunAll();
  // The slot before (under way when the driver started) is refused alike
  // or passed; the slot examined here is `slot`.
  EXPECT_TRUE(Starts(peers_, 1).empty());
  std::vector<ScheduleDriver::Event> of_slot;
  for (const ScheduleDriver::Event& e : driver.events()) {
    if (e.slot == slot) of_slot.push_back(e);
  }
  ASSERT_EQ(of_slot.size(), 1u);
  const ScheduleDriver::Event& refused = of_slot[0];
  EXPECT_EQ(refused.outcome, SlotOutcome::kRefused);
  EXPECT_EQ(refused.trace_id, d.trace_id);
  EXPECT_THAT(refused.error, ::testing::HasSubstr("in the past of this daemon's clock"));
  absl::StatusOr<v1::GetScheduleResponse> report = driver.GetSchedule({});
  ASSERT_TRUE(report.ok());
  const v1::ScheduleEvent& shown = report->events(report->events_size() - 1);
  EXPECT_EQ(shown.slot(), slot);
  EXPECT_FALSE(shown.captured());
  EXPECT_TRUE(shown.local());
  EXPECT_EQ(shown.outcome(), "refused by this daemon (local)");
  EXPECT_EQ(report->captures_today(), 0u);
}

// A job below min_step at the boundary that passes it before its window
// starts is captured in that slot, under the slot's id.
TEST_F(ScheduleDriverTest, AJobPassingMinStepMidSlotCapturesTheWindowAhead) {
  ScheduleOptions options = EveryMinute(1.0);
  options.rules[0].min_step = 500;
  const int64_t slot = SlotWithRoomBefore(options.rules[0], absl::Seconds(5));
  const SlotDecision d = DecideSlot("fleet", options.rules[0], "42", slot);
  clock_.Set(d.slot_start);
  std::shared_ptr<StepReading> steps =
      AttachStepping(1, 100, "42", 0, StepsAt(10, clock_.Now(), absl::Milliseconds(100)));
  std::unique_ptr<ScheduleDriver> driver = MakeDriver(core_.get(), options);
  driver->Start();
  RunAll();
  loop_.AdvanceBy(absl::Seconds(2));
  RunAll();
  EXPECT_TRUE(Starts(peers_, 1).empty());
  steps->current_step = 500;
  loop_.AdvanceBy(d.start - clock_.Now());
  RunAll();
  const std::vector<v1::ipc::StartCapture> starts = Starts(peers_, 1);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].trace_id(), d.trace_id);
  EXPECT_EQ(starts[0].start_time_unix_ns(), absl::ToUnixNanos(d.start));
  driver.reset();
  loop_.AdvanceBy(absl::Minutes(1));
  RunAll();
}

// A host that decides a slot after its window started (it started late in
// the slot, or its clock or wake-up is late) captures nothing of it and
// says so, as a local skip under the slot's trace id.
TEST_F(ScheduleDriverTest, AWindowAlreadyStartedIsReportedMissed) {
  const ScheduleOptions options = EveryMinute(1.0);
  const int64_t slot = SlotOf(absl::Minutes(1), clock_.Now()) + 10;
  const SlotDecision d = DecideSlot("fleet", options.rules[0], "42", slot);
  clock_.Set(d.start + absl::Milliseconds(1500));
  Attach(1, 100, "42", 0);
  std::unique_ptr<ScheduleDriver> driver = MakeDriver(core_.get(), options);
  driver->Start();
  RunAll();
  EXPECT_TRUE(Starts(peers_, 1).empty());
  ASSERT_EQ(driver->events().size(), 1u);
  const ScheduleDriver::Event& missed = driver->events()[0];
  EXPECT_EQ(missed.outcome, SlotOutcome::kWindowPassed);
  EXPECT_TRUE(IsLocalOutcome(missed.outcome));
  EXPECT_EQ(missed.slot, slot);
  EXPECT_EQ(missed.trace_id, d.trace_id);
  absl::StatusOr<v1::GetScheduleResponse> report = driver->GetSchedule({});
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->events_size(), 1);
  EXPECT_TRUE(report->events(0).local());
  EXPECT_FALSE(report->events(0).captured());
  EXPECT_THAT(report->events(0).outcome(), ::testing::HasSubstr("window already started"));
  driver.reset();
  RunAll();
}

// Skips are recorded with their reason, the local ones as such.
TEST_F(ScheduleDriverTest, SkipsAreRecordedWithTheirReason) {
  ScheduleOptions options = EveryMinute(1.0);
  options.rules[0].blackouts.push_back({});  // always
  Attach(1, 100, "42", 0);
  std::unique_ptr<ScheduleDriver> driver = MakeDriver(core_.get(), options);
  driver->Start();
  loop_.AdvanceBy(absl::Minutes(3));
  RunAll();
  EXPECT_TRUE(Starts(peers_, 1).empty());
  ASSERT_GE(driver->events().size(), 3u);
  for (const ScheduleDriver::Event& e : driver->events()) {
    EXPECT_EQ(e.outcome, SlotOutcome::kBlackout);
    EXPECT_EQ(e.job_id, "42");
  }

  options = EveryMinute(1.0);
  options.capture_time_per_day = absl::Seconds(10);  // two windows of 5s
  driver = MakeDriver(core_.get(), options);
  driver->Start();
  for (int s = 0; s < 5 * 60; ++s) {
    loop_.AdvanceBy(absl::Seconds(1));
    RunAll();
    AnswerCaptures(core_.get(), &peers_, 1, 100);
    RunAll();
  }
  int captures = 0;
  int local_skips = 0;
  for (const ScheduleDriver::Event& e : driver->events()) {
    captures += e.outcome == SlotOutcome::kCapture;
    local_skips += e.outcome == SlotOutcome::kHostCaptureTime;
  }
  EXPECT_EQ(captures, 2);
  EXPECT_GE(local_skips, 2);
  driver.reset();
  RunAll();
}

// A job in warm-up (every process below min_step) is not captured; once a
// process passes it, the job's slots are decided.
TEST_F(ScheduleDriverTest, MinStepSkipsWarmUp) {
  ScheduleOptions options = EveryMinute(1.0);
  options.rules[0].min_step = 500;
  std::shared_ptr<StepReading> steps =
      AttachStepping(1, 100, "42", 0, StepsAt(10, clock_.Now(), absl::Milliseconds(100)));
  std::unique_ptr<ScheduleDriver> driver = MakeDriver(core_.get(), options);
  driver->Start();
  loop_.AdvanceBy(absl::Minutes(3));
  RunAll();
  EXPECT_TRUE(Starts(peers_, 1).empty());
  steps->current_step = 500;
  loop_.AdvanceBy(absl::Minutes(2));
  RunAll();
  EXPECT_FALSE(Starts(peers_, 1).empty());
  driver.reset();
  loop_.AdvanceBy(absl::Minutes(1));
  RunAll();
}

}  // namespace
}  // namespace gpuctl::daemon::scheduler

namespace gpuctl::daemon::scheduler {
namespace {

// Two hosts with one rank each of job 42, on clocks that say nothing about
// steps: both request the same step blocks under the same trace ids.
TEST_F(ScheduleDriverTest, StepRulesAgreeByStepNumber) {
  SecondHost other(tmp_ + "/traces-b", options_, &clock_, &loop_, &worker_);
  ScheduleRule rule;
  rule.name = "steps";
  rule.selector.set_job_id("42");
  rule.probability = 0.5;
  rule.step_period = 10;
  rule.window_steps = 2;
  const ScheduleOptions options{.seed = "fleet", .rules = {rule}, .max_duty_cycle = 1};
  auto a_steps = AttachStepping(1, 100, "42", 0, StepsAt(1, clock_.Now(), absl::Seconds(1)));
  auto b_steps = StepsAt(1, clock_.Now(), absl::Seconds(1));
  v1::ipc::Hello hello = MakeHello(200, "42", 1);
  hello.set_protocol_minor(1);
  hello.set_step_counter(true);
  hello.set_capabilities(hello.capabilities() | v1::ipc::CAPABILITY_STEP_COUNTER);
  ASSERT_TRUE(other.core
                  ->OnPeerHello(1, {200, 1000, 1000}, hello,
                                std::make_unique<::gpuctl::testing::FakeStepCounter>(b_steps))
                  .ok());
  std::unique_ptr<ScheduleDriver> a = MakeDriver(core_.get(), options);
  std::unique_ptr<ScheduleDriver> b = MakeDriver(other.core.get(), options);
  a->Start();
  b->Start();
  absl::StatusOr<v1::GetScheduleResponse> report = a->GetSchedule({});
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->rules_size(), 1);
  EXPECT_TRUE(report->rules(0).driven());
  EXPECT_EQ(report->rules(0).window_steps(), 2u);
  for (int s = 0; s < 400; ++s) {
    loop_.AdvanceBy(absl::Seconds(1));
    a_steps->current_step = 1 + s;
    b_steps->current_step = 1 + s + (s % 2);  // the ranks drift by a step
    RunAll();
  }
  const std::vector<v1::ipc::StartCapture> on_a = Starts(peers_, 1);
  const std::vector<v1::ipc::StartCapture> on_b = Starts(other.peers, 1);
  ASSERT_GE(on_a.size(), 1u);
  ASSERT_EQ(on_a.size(), on_b.size());
  // Every block both hosts decided came to the same trace id and step.
  ASSERT_GT(a->events().size(), 5u);
  ASSERT_EQ(a->events().size(), b->events().size());
  for (size_t i = 0; i < a->events().size(); ++i) {
    EXPECT_EQ(a->events()[i].trace_id, b->events()[i].trace_id);
    EXPECT_EQ(a->events()[i].first_step, b->events()[i].first_step);
    EXPECT_EQ(a->events()[i].first_step % 10, 0u);
  }
  for (size_t i = 0; i < on_a.size(); ++i) {
    EXPECT_EQ(on_a[i].trace_id(), on_b[i].trace_id());
    EXPECT_EQ(on_a[i].start_step(), on_b[i].start_step());
    EXPECT_EQ(on_a[i].start_step() % 10, 0u);
    EXPECT_EQ(on_a[i].iterations(), 2u);
    StepBlockDecision d =
        DecideStepBlock("fleet", rule, "42", on_a[i].start_step() / 10, clock_.Now());
    EXPECT_TRUE(d.sampled);
  }
  a.reset();
  b.reset();
  RunAll();
}

}  // namespace
}  // namespace gpuctl::daemon::scheduler
