// The step rules' part of ScheduleDriver: polling the shared step counters
// and turning sampled step blocks into iteration windows.
#include <algorithm>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/common/log.h"
#include "daemon/core/proto_time.h"
#include "daemon/scheduler/schedule_driver.h"
#include "daemon/scheduler/slot_decision.h"

namespace gpuctl::daemon::scheduler {
namespace {

v1::TraceTrigger StepTraceTrigger(const ScheduleRule& rule, const StepBlockDecision& decision,
                                  absl::string_view fingerprint) {
  v1::TraceTrigger trigger;
  trigger.set_kind(v1::TRIGGER_KIND_SCHEDULED);
  v1::ScheduledTrigger* s = trigger.mutable_scheduled();
  s->set_rule(rule.name);
  s->set_slot(static_cast<int64_t>(decision.block));
  s->set_first_step(decision.first_step);
  s->set_step_period(rule.step_period);
  s->set_window_steps(rule.window_steps);
  s->set_probability(rule.probability);
  s->set_weight(1 / rule.probability);
  s->set_schedule_fingerprint(std::string(fingerprint));
  return trigger;
}

// What a step rule decided for one block (`pid`: the process it concerns,
// 0 for the whole job).
ScheduleDriver::Event StepEvent(const ScheduleRule& rule, const std::string& job_id,
                                const StepBlockDecision& d, SlotOutcome outcome, absl::Time now,
                                int32_t pid = 0) {
  return {.rule = rule.name,
          .job_id = job_id,
          .slot = static_cast<int64_t>(d.block),
          .outcome = outcome,
          .trace_id = d.trace_id,
          .error = "",
          .decided_at = now,
          .start = now,
          .first_step = d.first_step,
          .pid = pid};
}

}  // namespace

// One job's processes on this host, as a step rule sees them.
struct ScheduleDriver::StepJob {
  bool has_step = false;
  uint64_t max_step = 0;
  // The slowest known mean step period among its processes.
  absl::Duration step_period = absl::ZeroDuration();
  std::vector<int32_t> stepping;  // pids sharing a step counter
  std::vector<int32_t> without;   // pids sharing none (Kineto processes)
};

void ScheduleDriver::ArmStepPoll() {
  const bool any =
      std::any_of(options_.rules.begin(), options_.rules.end(),
                  [](const ScheduleRule& r) { return r.step_aligned() || r.anomaly_triggered(); });
  if (!any) return;
  step_timer_ = deps_.loop->PostDelayed(kStepPoll, [this] {
    step_timer_ = 0;
    OnStepPoll();
  });
}

void ScheduleDriver::OnStepPoll() {
  ++wakeups_;
  for (size_t i = 0; i < options_.rules.size(); ++i) {
    if (options_.rules[i].step_aligned()) PollStepRule(i);
    if (options_.rules[i].anomaly_triggered()) PollAnomalyRule(i);
  }
  ArmStepPoll();
}

void ScheduleDriver::PollStepRule(size_t rule_index) {
  const ScheduleRule& rule = options_.rules[rule_index];
  std::optional<v1::ListProcessesResponse> listed =
      ListRuleProcesses(rule, /*step_durations=*/false);
  if (!listed.has_value()) return;
  std::map<std::string, StepJob> jobs;
  for (const v1::ProcessInfo& p : listed->processes()) {
    if (p.job_id().empty()) continue;
    StepJob& job = jobs[p.job_id()];
    if (!p.has_current_step()) {
      job.without.push_back(p.pid());
      continue;
    }
    job.stepping.push_back(p.pid());
    job.max_step = job.has_step ? std::max(job.max_step, p.current_step()) : p.current_step();
    job.has_step = true;
    absl::StatusOr<absl::Duration> period = FromProtoDuration(p.step_period());
    if (p.has_step_period() && period.ok()) job.step_period = std::max(job.step_period, *period);
  }
  for (const auto& [job_id, job] : jobs) {
    if (job.has_step && job.max_step >= rule.min_step) DecideStepJob(rule_index, job_id, job);
  }
}

void ScheduleDriver::DecideStepJob(size_t rule_index, const std::string& job_id,
                                   const StepJob& job) {
  const ScheduleRule& rule = options_.rules[rule_index];
  const uint64_t p = rule.step_period;
  // The first block whose first step is at least kStepMargin ahead.
  const uint64_t ahead = job.max_step + kStepMargin;
  const uint64_t k0 = (ahead + p - 1) / p;
  const absl::Time now = deps_.clock->Now();
  auto [it, fresh] = next_block_.try_emplace({rule_index, job_id}, k0);
  // Blocks this host saw go by undecided (its steps outran the polls):
  // the sampled ones are skips of their own, since other hosts may have
  // captured them.
  for (uint64_t k = std::max(it->second, k0 - std::min(k0, kMaxPassedBlocks)); k < k0; ++k) {
    StepBlockDecision d = DecideStepBlock(options_.seed, rule, job_id, k, now);
    if (!d.sampled) continue;
    Record(StepEvent(rule, job_id, d, SlotOutcome::kWindowPassed, now));
  }
  it->second = std::max(it->second, k0);
  // Decide the block once its first step is within two polls' worth of
  // steps (at the job's step period), so the request reaches the library
  // before the step; a job whose period is unknown waits for the margin.
  uint64_t lookahead = kStepMargin;
  if (job.step_period > absl::ZeroDuration()) {
    lookahead +=
        static_cast<uint64_t>(absl::Ceil(2 * kStepPoll, job.step_period) / job.step_period);
  }
  const uint64_t first = it->second * p;
  if (first - job.max_step > lookahead) return;
  const uint64_t block = it->second++;
  StepBlockDecision d = DecideStepBlock(options_.seed, rule, job_id, block, now);
  if (!d.sampled) return;
  SlotOutcome outcome = InBlackout(rule, now, now + absl::Seconds(1)) ? SlotOutcome::kBlackout
                                                                      : SlotOutcome::kCapture;
  const absl::Duration estimate = job.step_period * static_cast<int64_t>(rule.window_steps);
  if (outcome == SlotOutcome::kCapture) outcome = LocalSlotOutcome(options_, Usage(), estimate);
  if (outcome != SlotOutcome::kCapture) {
    Record(StepEvent(rule, job_id, d, outcome, now));
    return;
  }
  for (int32_t pid : job.without) {
    Record(StepEvent(rule, job_id, d, SlotOutcome::kNoStepCounter, now, pid));
  }
  capture_time_today_ += estimate;
  RequestStepCapture(rule, job_id, d, job.stepping);
}

void ScheduleDriver::RequestStepCapture(const ScheduleRule& rule, const std::string& job_id,
                                        const StepBlockDecision& decision,
                                        const std::vector<int32_t>& pids) {
  v1::TraceRequest request;
  request.mutable_selector()->set_job_id(job_id);
  for (int32_t pid : pids) request.mutable_selector()->add_pids(pid);
  request.mutable_selector()->set_include_helpers(rule.selector.include_helpers());
  request.set_trace_id(decision.trace_id);
  request.set_iterations(rule.window_steps);
  request.set_start_step(decision.first_step);
  for (const std::string& activity : rule.activities) request.add_activities(activity);
  const absl::Time now = deps_.clock->Now();
  Event event = StepEvent(rule, job_id, decision, SlotOutcome::kCapture, now);
  absl::StatusOr<std::string> started = deps_.core->StartTrace(
      request, StepTraceTrigger(rule, decision, fingerprint_), ObserverFor(event));
  if (!started.ok()) {
    event.outcome = SlotOutcome::kRefused;
    event.error = std::string(started.status().message());
    LogWarning("scheduled step trace not started", {{"rule", rule.name},
                                                    {"job", job_id},
                                                    {"block", decision.block},
                                                    {"error", started.status().message()}});
  } else {
    LogInfo("scheduled step trace", {{"trace_id", decision.trace_id},
                                     {"rule", rule.name},
                                     {"job", job_id},
                                     {"first_step", decision.first_step},
                                     {"steps", rule.window_steps},
                                     {"weight", 1 / rule.probability}});
  }
  Record(std::move(event));
}

}  // namespace gpuctl::daemon::scheduler
