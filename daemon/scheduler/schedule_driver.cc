#include "daemon/scheduler/schedule_driver.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/core/proto_time.h"
#include "daemon/scheduler/slot_decision.h"

namespace gpuctl::daemon::scheduler {

v1::TraceTrigger ScheduledTraceTrigger(const ScheduleRule& rule, const SlotDecision& decision,
                                       absl::string_view fingerprint) {
  v1::TraceTrigger trigger;
  trigger.set_kind(v1::TRIGGER_KIND_SCHEDULED);
  v1::ScheduledTrigger* s = trigger.mutable_scheduled();
  s->set_rule(rule.name);
  s->set_slot(decision.slot);
  *s->mutable_slot_start() = ToProtoTimestamp(decision.slot_start);
  *s->mutable_period() = ToProtoDuration(rule.period);
  s->set_probability(rule.probability);
  s->set_weight(1 / rule.probability);
  s->set_schedule_fingerprint(std::string(fingerprint));
  return trigger;
}

ScheduleDriver::ScheduleDriver(ScheduleOptions options, Deps deps)
    : options_(std::move(options)),
      deps_(std::move(deps)),
      fingerprint_(ScheduleFingerprint(options_)) {}

ScheduleDriver::~ScheduleDriver() {
  if (listening_) deps_.core->SetAttachListener(nullptr);
  if (attach_timer_ != 0) deps_.loop->Cancel(attach_timer_);
  if (boundary_timer_ != 0) deps_.loop->Cancel(boundary_timer_);
  if (step_timer_ != 0) deps_.loop->Cancel(step_timer_);
  for (const auto& [key, id] : capture_timers_) deps_.loop->Cancel(id);
}

void ScheduleDriver::Start() {
  const absl::Time now = deps_.clock->Now();
  LogInfo("schedule", {{"rules", options_.rules.size()}, {"fingerprint", fingerprint_}});
  for (const ScheduleRule& rule : options_.rules) {
    LogInfo("schedule rule", {{"rule", rule.name},
                              {"duty_cycle", DutyCycle(rule)},
                              {"probability", rule.probability},
                              {"driven", rule.anomaly_triggered() ? "by anomalies"
                                         : rule.step_aligned()    ? "by steps"
                                                                  : "by time"}});
  }
  next_slot_.assign(options_.rules.size(), INT64_MAX);
  decided_.assign(options_.rules.size(), DecidedSlot{});
  for (size_t i = 0; i < options_.rules.size(); ++i) {
    const ScheduleRule& rule = options_.rules[i];
    if (!rule.time_driven()) continue;
    const int64_t slot = SlotOf(rule.period, now);
    next_slot_[i] = slot + 1;
    DecideRule(i, slot);
  }
  if (std::any_of(options_.rules.begin(), options_.rules.end(),
                  [](const ScheduleRule& r) { return r.time_driven(); })) {
    deps_.core->SetAttachListener(
        [this](const v1::ProcessInfo& process) { OnProcessAttached(process); });
    listening_ = true;
  }
  ArmNextBoundary();
  ArmStepPoll();
}

void ScheduleDriver::OnProcessAttached(const v1::ProcessInfo& process) {
  if (process.job_id().empty()) return;
  attached_jobs_.insert(process.job_id());
  if (attach_timer_ != 0) return;
  attach_timer_ = deps_.loop->PostDelayed(absl::ZeroDuration(), [this] {
    attach_timer_ = 0;
    DecideAttachedJobs();
  });
}

void ScheduleDriver::DecideAttachedJobs() {
  const absl::flat_hash_set<std::string> jobs = std::move(attached_jobs_);
  attached_jobs_.clear();
  const absl::Time now = deps_.clock->Now();
  for (size_t i = 0; i < options_.rules.size(); ++i) {
    if (next_slot_[i] == INT64_MAX) continue;
    // Past a boundary whose wake-up has not run yet, that wake-up decides.
    const int64_t slot = next_slot_[i] - 1;
    if (SlotOf(options_.rules[i].period, now) != slot) continue;
    DecideRule(i, slot, &jobs);
  }
}

void ScheduleDriver::ArmNextBoundary() {
  absl::Time next = absl::InfiniteFuture();
  for (size_t i = 0; i < options_.rules.size(); ++i) {
    if (next_slot_[i] == INT64_MAX) continue;
    next = std::min(next, SlotStart(options_.rules[i].period, next_slot_[i]));
  }
  if (next == absl::InfiniteFuture()) return;
  const absl::Duration delay = std::max(absl::ZeroDuration(), next - deps_.clock->Now());
  boundary_timer_ = deps_.loop->PostDelayed(delay, [this] {
    boundary_timer_ = 0;
    OnBoundary();
  });
}

void ScheduleDriver::OnBoundary() {
  ++wakeups_;
  const absl::Time now = deps_.clock->Now();
  for (size_t i = 0; i < options_.rules.size(); ++i) {
    const ScheduleRule& rule = options_.rules[i];
    if (next_slot_[i] == INT64_MAX || SlotStart(rule.period, next_slot_[i]) > now) continue;
    // A late wake-up (a stalled loop, a suspended host) decides the slot it
    // is in; the slots it slept through are gone.
    const int64_t slot = SlotOf(rule.period, now);
    DecideRule(i, slot);
    next_slot_[i] = slot + 1;
  }
  ArmNextBoundary();
}

HostUsage ScheduleDriver::Usage() {
  const absl::CivilDay today = absl::ToCivilDay(deps_.clock->Now(), absl::UTCTimeZone());
  if (today != usage_day_) {
    usage_day_ = today;
    capture_time_today_ = absl::ZeroDuration();
  }
  HostUsage usage;
  usage.capture_time_today = capture_time_today_;
  if (options_.min_free_store_bytes > 0 && deps_.free_store_bytes) {
    usage.free_store_bytes = deps_.free_store_bytes();
  }
  return usage;
}

std::optional<v1::ListProcessesResponse> ScheduleDriver::ListRuleProcesses(const ScheduleRule& rule,
                                                                           bool step_durations) {
  v1::ListProcessesRequest request;
  *request.mutable_selector() = rule.selector;
  request.set_include_step_durations(step_durations);
  absl::StatusOr<v1::ListProcessesResponse> listed = deps_.core->ListProcesses(request);
  if (!listed.ok()) {
    LogWarning("schedule rule cannot list processes",
               {{"rule", rule.name}, {"error", listed.status().message()}});
    return std::nullopt;
  }
  return *std::move(listed);
}

void ScheduleDriver::DecideRule(size_t rule_index, int64_t slot,
                                const absl::flat_hash_set<std::string>* only_jobs) {
  const ScheduleRule& rule = options_.rules[rule_index];
  DecidedSlot& decided = decided_[rule_index];
  if (decided.slot != slot) decided = DecidedSlot{.slot = slot, .jobs = {}, .warming = {}};
  std::optional<v1::ListProcessesResponse> listed =
      ListRuleProcesses(rule, /*step_durations=*/false);
  if (!listed.has_value()) return;
  std::map<std::string, bool> jobs;  // job id -> some process is past min_step
  for (const v1::ProcessInfo& p : listed->processes()) {
    if (p.job_id().empty()) continue;
    const bool warm =
        rule.min_step == 0 || (p.has_current_step() && p.current_step() >= rule.min_step);
    jobs[p.job_id()] = jobs[p.job_id()] || warm;
  }
  const absl::Time now = deps_.clock->Now();
  for (const auto& [job_id, warm] : jobs) {
    if (only_jobs != nullptr && !only_jobs->contains(job_id)) continue;
    if (decided.jobs.contains(job_id)) continue;
    if (!warm) {
      ArmWarmUpCheck(rule_index, job_id, slot);
      continue;
    }
    decided.jobs.insert(job_id);
    SlotVerdict verdict = DecideJobSlot(options_, rule, job_id, slot, Usage());
    if (verdict.outcome == SlotOutcome::kNotSampled) {
      if (deps_.on_decision) deps_.on_decision(rule.name, SlotOutcome::kNotSampled);
      continue;
    }
    // A window already under way is not joined late: its start instant is
    // past. Said, since the other hosts of the job captured it.
    if (verdict.outcome == SlotOutcome::kCapture && verdict.decision.start <= now) {
      verdict.outcome = SlotOutcome::kWindowPassed;
    }
    if (verdict.outcome != SlotOutcome::kCapture) {
      Record({.rule = rule.name,
              .job_id = job_id,
              .slot = slot,
              .outcome = verdict.outcome,
              .trace_id = verdict.decision.trace_id,
              .error = "",
              .decided_at = now,
              .start = verdict.decision.start});
      continue;
    }
    capture_time_today_ += rule.window;
    const absl::Duration delay =
        std::max(absl::ZeroDuration(), verdict.decision.start - kRequestLead - now);
    const uint64_t key = next_capture_key_++;
    capture_timers_[key] = deps_.loop->PostDelayed(
        delay, [this, key, rule_index, job = job_id, decision = std::move(verdict.decision)] {
          capture_timers_.erase(key);
          ++wakeups_;
          RequestCapture(options_.rules[rule_index], job, decision);
        });
  }
}

void ScheduleDriver::ArmWarmUpCheck(size_t rule_index, const std::string& job_id, int64_t slot) {
  DecidedSlot& decided = decided_[rule_index];
  if (decided.warming.contains(job_id)) return;
  const SlotDecision d = DecideSlot(options_.seed, options_.rules[rule_index], job_id, slot);
  const absl::Time check = d.start - kRequestLead;
  const absl::Time now = deps_.clock->Now();
  if (!d.sampled || check <= now) return;
  decided.warming.insert(job_id);
  const uint64_t key = next_capture_key_++;
  capture_timers_[key] =
      deps_.loop->PostDelayed(check - now, [this, key, rule_index, job_id, slot] {
        capture_timers_.erase(key);
        ++wakeups_;
        if (decided_[rule_index].slot != slot) return;
        const absl::flat_hash_set<std::string> only = {job_id};
        DecideRule(rule_index, slot, &only);
      });
}

void ScheduleDriver::RequestCapture(const ScheduleRule& rule, const std::string& job_id,
                                    const SlotDecision& decision) {
  v1::TraceRequest request;
  *request.mutable_selector() = rule.selector;
  request.mutable_selector()->set_job_id(job_id);
  request.set_trace_id(decision.trace_id);
  *request.mutable_start_time() = ToProtoTimestamp(decision.start);
  *request.mutable_duration() = ToProtoDuration(rule.window);
  for (const std::string& activity : rule.activities) request.add_activities(activity);
  Event event{.rule = rule.name,
              .job_id = job_id,
              .slot = decision.slot,
              .outcome = SlotOutcome::kCapture,
              .trace_id = decision.trace_id,
              .error = "",
              .decided_at = deps_.clock->Now(),
              .start = decision.start};
  absl::StatusOr<std::string> started = deps_.core->StartTrace(
      request, ScheduledTraceTrigger(rule, decision, fingerprint_), ObserverFor(event));
  if (!started.ok()) {
    event.outcome = SlotOutcome::kRefused;
    event.error = std::string(started.status().message());
    LogWarning("scheduled trace not started", {{"rule", rule.name},
                                               {"job", job_id},
                                               {"slot", decision.slot},
                                               {"error", started.status().message()}});
  } else {
    LogInfo("scheduled trace", {{"trace_id", decision.trace_id},
                                {"rule", rule.name},
                                {"job", job_id},
                                {"slot", decision.slot},
                                {"probability", rule.probability},
                                {"weight", 1 / rule.probability},
                                {"schedule", fingerprint_.substr(0, 16)}});
  }
  Record(std::move(event));
}

std::shared_ptr<TraceObserver> ScheduleDriver::ObserverFor(Event capture) {
  std::string trace_id = capture.trace_id;
  return std::make_shared<ScheduledTraceObserver>(
      std::move(trace_id), [this, alive = std::weak_ptr<bool>(alive_),
                            capture = std::move(capture)](const v1::ProcessResult& result) {
        if (alive.expired()) return;
        Event skipped = capture;
        skipped.outcome = ScheduledTraceObserver::IsPreempted(result) ? SlotOutcome::kPreempted
                                                                      : SlotOutcome::kProcessBusy;
        skipped.error = result.message();
        skipped.pid = result.pid();
        skipped.decided_at = deps_.clock->Now();
        // A process busy when the window opens is answered inside
        // StartTrace, before the capture itself is recorded: record the
        // skip after it.
        deps_.loop->Post([this, alive, skipped = std::move(skipped)]() mutable {
          if (!alive.expired()) Record(std::move(skipped));
        });
      });
}

void ScheduleDriver::Record(Event event) {
  if (deps_.on_decision) deps_.on_decision(event.rule, event.outcome);
  if (event.outcome != SlotOutcome::kCapture) {
    LogInfo("scheduled capture skipped", {{"rule", event.rule},
                                          {"job", event.job_id},
                                          {"slot", event.slot},
                                          {"pid", event.pid},
                                          {"reason", SlotOutcomeName(event.outcome)},
                                          {"trace_id", event.trace_id}});
  }
  events_.push_back(std::move(event));
  while (events_.size() > kMaxEvents) events_.pop_front();
}

}  // namespace gpuctl::daemon::scheduler
