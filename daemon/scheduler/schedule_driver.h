#ifndef GPUCTL_DAEMON_SCHEDULER_SCHEDULE_DRIVER_H_
#define GPUCTL_DAEMON_SCHEDULER_SCHEDULE_DRIVER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "daemon/common/clock.h"
#include "daemon/common/log.h"
#include "daemon/common/task_runner.h"
#include "daemon/core/daemon_core.h"
#include "daemon/core/schedule_reporter.h"
#include "daemon/scheduler/anomaly_detector.h"
#include "daemon/scheduler/budget.h"
#include "daemon/scheduler/schedule_options.h"
#include "daemon/scheduler/slot_decision.h"
#include "gpuctl/v1/manifest.pb.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon::scheduler {

// Scheduled traces (time slots, step blocks and anomalies alike) report to
// the log, and a process the capture did not get to `on_skipped` (called
// with its result, on the loop; may be empty): one an on-demand trace took
// over (its message starts with kPreemptedByOnDemand) or one that was busy
// when the window opened (CAPTURE_STATUS_BUSY: already capturing, or held
// by another profiler). The core keeps the manifest.
class ScheduledTraceObserver final : public TraceObserver {
 public:
  using SkippedFn = absl::AnyInvocable<void(const v1::ProcessResult&)>;
  explicit ScheduledTraceObserver(std::string trace_id, SkippedFn on_skipped = nullptr)
      : trace_id_(std::move(trace_id)), on_skipped_(std::move(on_skipped)) {}
  void OnEvent(const v1::TraceEvent& event) override {
    if (on_skipped_ && event.has_result() && IsSkip(event.result())) on_skipped_(event.result());
  }
  void OnDone(const absl::Status& status) override {
    if (!status.ok()) {
      LogWarning("scheduled trace ended", {{"trace_id", trace_id_}, {"status", status.ToString()}});
    }
  }
  // Whether `result` is a process the capture did not get to.
  static bool IsPreempted(const v1::ProcessResult& result) {
    return absl::StartsWith(result.message(), kPreemptedByOnDemand);
  }
  static bool IsSkip(const v1::ProcessResult& result) {
    return IsPreempted(result) || result.status() == v1::CAPTURE_STATUS_BUSY;
  }

 private:
  std::string trace_id_;
  SkippedFn on_skipped_;
};

// What a scheduled trace's manifest records of its rule and slot: the
// probability, the weight 1 / probability, the schedule's fingerprint.
v1::TraceTrigger ScheduledTraceTrigger(const ScheduleRule& rule, const SlotDecision& decision,
                                       absl::string_view fingerprint);

// Starts the scheduled traces of a schedule's time rules through the
// core's StartTrace. It wakes at each rule's slot boundary (and at each
// capture's request instant), never in between: at a boundary it lists the
// processes the rule selects, groups them by job id and decides each job's
// slot (DecideJobSlot); a capture is requested kRequestLead before its
// start instant, with the derived trace id and start, so every host of the
// job opens the same window under the same id. Processes without a job id
// are left out: hosts could not agree on them.
//
// A job none of whose processes were attached (or past min_step) at the
// boundary is decided later in the slot: when one of its processes
// attaches (after a daemon restart, the libraries re-attaching; or a job
// starting mid-slot) the slot under way is decided for that job with the
// same pure decision, so the host captures the window other hosts capture,
// under the same id and start, if that start is still ahead. A window
// already started is not joined late (the capture would be shorter than
// the other hosts' and open at another instant): it is recorded as a
// kWindowPassed skip. A job whose processes are all below min_step is
// checked again kRequestLead before a sampled window's start, and captured
// then if one has passed it; warm-up itself is not recorded as a skip.
//
// Step rules are driven by polling the step counters the libraries share
// (every kStepPoll while a step rule exists): for each selected job, the
// largest current step on this host gives the next block k whose first
// step k*step_period is at least kStepMargin steps ahead; once that step
// is within the lookahead (kStepMargin, plus the steps of two polls at the
// job's step period) the block is decided from the hash of (seed, rule,
// job, k) and a sampled block becomes an iteration window starting at
// step k*step_period, under the trace id of DecideStepBlock. Ranks agree
// by step number, whatever their clocks say. Processes sharing no step
// counter (Kineto processes) are left out of the window, each recorded as
// a kNoStepCounter skip of the block.
//
// Anomaly rules ride on the same poll (it runs only while a step or
// anomaly rule exists): each selected job's step counters, with their
// recent durations, go to the job's JobAnomalyDetector. An anomaly is
// captured, within the same host limits and blackouts, as the rule's
// window from now or its window_steps from the next step-bucket boundary,
// under the trace id DecideAnomaly derives from (seed, rule, job, bucket),
// so hosts that each see the same event land under one id. Every host
// decides for itself whether it saw an anomaly. Skips are recorded like
// the others: within the cool-down (kCoolDown), past the rule's daily_cap
// on this host (kHostDailyCap), or a process of the job without a step
// counter (kNoStepCounter: it is left out of the capture).
//
// Whatever the rule, a request the core refuses is recorded as kRefused
// with the core's error (e.g. a window already in the past of the core's
// clock), and a process the capture did not get to as an event of its own
// naming it: kPreempted (an on-demand trace took it over) or kProcessBusy
// (already capturing, or held by another profiler, when the window opened).
//
// Lives on the loop thread: construct, Start and destroy it there, after
// the core and before the core goes away.
class ScheduleDriver final : public ScheduleReporter {
 public:
  struct Deps {
    Clock* clock;
    TaskRunner* loop;
    DaemonCore* core;
    // The store's free bytes, read when a capture is decided.
    absl::AnyInvocable<uint64_t()> free_store_bytes;
    // Told of every decision for a job (a capture, a skip, or a slot the
    // hash did not draw), for the daemon's metrics; may be empty.
    absl::AnyInvocable<void(absl::string_view rule, SlotOutcome outcome)> on_decision{};
  };

  // What happened to a job's slot (captures and skips alike).
  struct Event {
    std::string rule;
    std::string job_id;
    int64_t slot = 0;
    SlotOutcome outcome = SlotOutcome::kCapture;
    std::string trace_id;
    // Why the core refused the trace, for a capture that did not start.
    std::string error;
    // When the slot was decided (a capture: when its trace was requested),
    // and the window's planned start.
    absl::Time decided_at;
    absl::Time start;
    // Step rules: `slot` is the block, the window starts at this step and
    // `pid` names the process a kNoStepCounter skip is about.
    uint64_t first_step = 0;
    int32_t pid = 0;
    // Anomaly rules: what was seen ("slow step 230 of pid 4711 ...").
    std::string anomaly = {};
  };

  // How far ahead of a window's start the trace is requested.
  static constexpr absl::Duration kRequestLead = absl::Seconds(1);
  static constexpr size_t kMaxEvents = 256;
  // Step rules: how often the step counters are read, how many steps ahead
  // of the largest current step a block's first step must lie to be
  // requested, and the most passed blocks examined in one poll.
  static constexpr absl::Duration kStepPoll = absl::Seconds(1);
  static constexpr uint64_t kStepMargin = 2;
  static constexpr uint64_t kMaxPassedBlocks = 64;

  ScheduleDriver(ScheduleOptions options, Deps deps);
  ~ScheduleDriver() override;
  ScheduleDriver(const ScheduleDriver&) = delete;
  ScheduleDriver& operator=(const ScheduleDriver&) = delete;

  // Decides the current slot of every time rule (a restart mid-slot
  // captures what is still ahead), arms the next wake-up and listens to
  // the core's attaches (until destroyed).
  void Start();

  // The last kMaxEvents captures and skips, oldest first (slots the hash
  // did not draw are not listed).
  const std::deque<Event>& events() const { return events_; }
  // Wake-ups so far: slot boundaries, capture requests and step polls
  // (which also serve anomaly rules).
  uint64_t wakeups() const { return wakeups_; }
  const std::string& fingerprint() const { return fingerprint_; }

  // The rules, their next slots, today's use and the recent events.
  absl::StatusOr<v1::GetScheduleResponse> GetSchedule(
      const v1::GetScheduleRequest& request) override;
  // The job's drawn slots (PreviewJob), at most kMaxPreviewSlots.
  PreviewTask Preview(const v1::GetScheduleRequest& request) const override;

  static constexpr uint32_t kDefaultNextSlots = 3;
  static constexpr uint32_t kMaxNextSlots = 100;
  static constexpr absl::Duration kDefaultPreview = absl::Hours(24);
  static constexpr absl::Duration kMaxPreview = absl::Hours(24 * 7);
  static constexpr size_t kMaxPreviewSlots = 10000;

 private:
  void ArmNextBoundary();
  void OnBoundary();
  // The processes `rule` selects, with their recent step durations when
  // asked; nullopt (logged) when the core refuses the listing.
  std::optional<v1::ListProcessesResponse> ListRuleProcesses(const ScheduleRule& rule,
                                                             bool step_durations);
  // Decides the jobs of `slot` not decided yet (only those in `only_jobs`
  // when given).
  void DecideRule(size_t rule_index, int64_t slot,
                  const absl::flat_hash_set<std::string>* only_jobs = nullptr);
  // A job with no process past min_step: checks it again shortly before
  // its window if the slot is drawn and the window is still ahead.
  void ArmWarmUpCheck(size_t rule_index, const std::string& job_id, int64_t slot);
  void OnProcessAttached(const v1::ProcessInfo& process);
  void DecideAttachedJobs();
  void RequestCapture(const ScheduleRule& rule, const std::string& job_id,
                      const SlotDecision& decision);
  void Record(Event event);
  // The observer of a capture described by `capture`: a process an
  // on-demand trace takes over is recorded as a kPreempted event of it, a
  // process busy when the window opened as a kProcessBusy event.
  std::shared_ptr<TraceObserver> ObserverFor(Event capture);
  // Step rules (schedule_step_driver.cc).
  void ArmStepPoll();
  void OnStepPoll();
  void PollStepRule(size_t rule_index);
  struct StepJob;
  void DecideStepJob(size_t rule_index, const std::string& job_id, const StepJob& job);
  void RequestStepCapture(const ScheduleRule& rule, const std::string& job_id,
                          const StepBlockDecision& decision, const std::vector<int32_t>& pids);
  // Anomaly rules (schedule_anomaly_driver.cc).
  void PollAnomalyRule(size_t rule_index);
  struct AnomalyJob;
  void DecideAnomalyJob(size_t rule_index, const std::string& job_id, const AnomalyJob& job,
                        const Detection& detection);
  SlotOutcome AnomalyOutcome(size_t rule_index, const std::string& job_id,
                             const Detection& detection, absl::Duration estimate);
  void RequestAnomalyCapture(const ScheduleRule& rule, const std::string& job_id,
                             const AnomalyDecision& decision, const Anomaly& anomaly,
                             const std::vector<int32_t>& pids);
  HostUsage Usage();
  // GetSchedule's parts.
  void ReportRules(uint32_t next_slots, v1::GetScheduleResponse& response) const;
  void ReportEvents(v1::GetScheduleResponse& response) const;

  ScheduleOptions options_;
  Deps deps_;
  std::string fingerprint_;
  // The next slot each time rule decides (by index into options_.rules).
  std::vector<int64_t> next_slot_;
  // By rule index: the slot under way, its jobs decided so far, and its
  // jobs in warm-up whose check is armed.
  struct DecidedSlot {
    int64_t slot = INT64_MIN;
    absl::flat_hash_set<std::string> jobs;
    absl::flat_hash_set<std::string> warming;
  };
  std::vector<DecidedSlot> decided_;
  // Jobs whose processes attached since the last DecideAttachedJobs, and
  // its pending task (attaches in a burst are decided together).
  absl::flat_hash_set<std::string> attached_jobs_;
  TaskRunner::TimerId attach_timer_ = 0;
  bool listening_ = false;
  TaskRunner::TimerId boundary_timer_ = 0;
  // Capture requests armed and not yet run, by a key of their own.
  absl::flat_hash_map<uint64_t, TaskRunner::TimerId> capture_timers_;
  uint64_t next_capture_key_ = 0;
  std::deque<Event> events_;
  TaskRunner::TimerId step_timer_ = 0;
  // Step rules: the next block not yet decided, by rule index and job id.
  absl::flat_hash_map<std::pair<size_t, std::string>, uint64_t> next_block_;
  // Anomaly rules: the detector and today's captures (UTC day, count) by
  // rule index and job id.
  absl::flat_hash_map<std::pair<size_t, std::string>, JobAnomalyDetector> detectors_;
  absl::flat_hash_map<std::pair<size_t, std::string>, std::pair<absl::CivilDay, uint32_t>>
      anomaly_captures_;
  uint64_t wakeups_ = 0;
  // Observers outlive the driver: they check this before calling it.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Local usage: scheduled window time started on `usage_day_`.
  absl::CivilDay usage_day_;
  absl::Duration capture_time_today_ = absl::ZeroDuration();
};

// Adds request.preview_job's drawn slots under `options` (at most
// ScheduleDriver::kMaxPreviewSlots, from response.now() for
// preview_duration) to `response`; nothing without a preview_job.
// INVALID_ARGUMENT for a duration outside (0, kMaxPreview] or a range too
// long to hash.
absl::Status AddPreview(const ScheduleOptions& options, const v1::GetScheduleRequest& request,
                        v1::GetScheduleResponse& response);

}  // namespace gpuctl::daemon::scheduler

#endif  // GPUCTL_DAEMON_SCHEDULER_SCHEDULE_DRIVER_H_
