// The anomaly rules' part of ScheduleDriver: judging each selected job's
// step durations on the step poll and capturing the anomalies found.
#include <algorithm>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/core/proto_time.h"
#include "daemon/scheduler/schedule_driver.h"
#include "daemon/scheduler/slot_decision.h"

namespace gpuctl::daemon::scheduler {
namespace {

AnomalyParams ParamsOf(const ScheduleRule& rule) {
  return {.slow_factor = rule.anomaly.slow_factor,
          .hang_after = rule.anomaly.hang_after,
          .min_step = rule.min_step,
          .min_samples = rule.anomaly.min_samples,
          .cooldown = rule.anomaly.cooldown};
}

ProcessSteps StepsOf(const v1::ProcessInfo& p) {
  ProcessSteps steps;
  steps.pid = p.pid();
  steps.rank = p.rank();
  steps.current_step = p.current_step();
  absl::StatusOr<absl::Time> last = FromProtoTimestamp(p.last_step_time(), "last_step_time");
  if (p.has_last_step_time() && last.ok()) steps.last_step_time = *last;
  steps.durations_total = p.step_durations_total();
  steps.recent.reserve(p.recent_step_ns_size());
  for (int64_t ns : p.recent_step_ns()) steps.recent.push_back(absl::Nanoseconds(ns));
  return steps;
}

// To the millisecond from 10 ms on, to the microsecond below.
std::string Readable(absl::Duration d) {
  return absl::FormatDuration(
      absl::Trunc(d, d >= absl::Milliseconds(10) ? absl::Milliseconds(1) : absl::Microseconds(1)));
}

// "slow step 230 of pid 4711 (rank 3): 2.1s, median 180ms".
std::string DescribeAnomaly(const Anomaly& a) {
  const std::string who = absl::StrCat(" of pid ", a.pid, " (rank ", a.rank, "): ");
  const std::string median = a.median > absl::ZeroDuration()
                                 ? absl::StrCat(", median ", Readable(a.median))
                                 : ", median unknown";
  if (a.kind == AnomalyKind::kHang) {
    return absl::StrCat("no step after step ", a.step, who, "for ", Readable(a.step_time), median);
  }
  return absl::StrCat("slow step ", a.step, who, Readable(a.step_time),
                      a.in_progress ? " so far" : "", median);
}

v1::TraceTrigger AnomalyTraceTrigger(const ScheduleRule& rule, const AnomalyDecision& decision,
                                     const Anomaly& a, absl::string_view fingerprint,
                                     absl::Time now) {
  v1::TraceTrigger trigger;
  trigger.set_kind(v1::TRIGGER_KIND_ANOMALY);
  v1::ScheduledTrigger* s = trigger.mutable_scheduled();
  s->set_rule(rule.name);
  s->set_slot(static_cast<int64_t>(decision.bucket));
  if (rule.window_steps > 0) {
    s->set_first_step(decision.first_step);
    s->set_window_steps(rule.window_steps);
  }
  s->set_probability(1);
  s->set_weight(1);
  s->set_schedule_fingerprint(std::string(fingerprint));
  v1::AnomalyTrigger* out = trigger.mutable_anomaly();
  out->set_kind(a.kind == AnomalyKind::kHang ? v1::ANOMALY_KIND_HANG : v1::ANOMALY_KIND_SLOW_STEP);
  out->set_pid(a.pid);
  out->set_rank(a.rank);
  out->set_step(a.step);
  *out->mutable_step_time() = ToProtoDuration(a.step_time);
  out->set_in_progress(a.in_progress);
  if (a.median > absl::ZeroDuration()) *out->mutable_median() = ToProtoDuration(a.median);
  out->set_slow_factor(rule.anomaly.slow_factor);
  if (rule.anomaly.hang_after > absl::ZeroDuration()) {
    *out->mutable_hang_after() = ToProtoDuration(rule.anomaly.hang_after);
  }
  out->set_step_bucket(decision.bucket);
  *out->mutable_detected_at() = ToProtoTimestamp(now);
  return trigger;
}

ScheduleDriver::Event AnomalyEvent(const ScheduleRule& rule, const std::string& job_id,
                                   const AnomalyDecision& d, const Anomaly& a, SlotOutcome outcome,
                                   absl::Time now) {
  return {.rule = rule.name,
          .job_id = job_id,
          .slot = static_cast<int64_t>(d.bucket),
          .outcome = outcome,
          .trace_id = d.trace_id,
          .error = "",
          .decided_at = now,
          .start = now,
          .first_step = rule.window_steps > 0 ? d.first_step : 0,
          .pid = a.pid,
          .anomaly = DescribeAnomaly(a)};
}

}  // namespace

// One job's processes on this host, as an anomaly rule sees them.
struct ScheduleDriver::AnomalyJob {
  std::vector<ProcessSteps> steps;  // processes sharing a step counter
  uint64_t max_step = 0;
  std::vector<int32_t> without;  // pids sharing none (Kineto processes)
};

void ScheduleDriver::PollAnomalyRule(size_t rule_index) {
  const ScheduleRule& rule = options_.rules[rule_index];
  std::optional<v1::ListProcessesResponse> listed =
      ListRuleProcesses(rule, /*step_durations=*/true);
  if (!listed.has_value()) return;
  std::map<std::string, AnomalyJob> jobs;
  for (const v1::ProcessInfo& p : listed->processes()) {
    if (p.job_id().empty()) continue;
    AnomalyJob& job = jobs[p.job_id()];
    if (!p.has_current_step()) {
      job.without.push_back(p.pid());
      continue;
    }
    job.steps.push_back(StepsOf(p));
    job.max_step = std::max(job.max_step, p.current_step());
  }
  // Jobs gone from the host are forgotten.
  absl::erase_if(detectors_, [&](const auto& entry) {
    return entry.first.first == rule_index && !jobs.contains(entry.first.second);
  });
  const absl::Time now = deps_.clock->Now();
  for (const auto& [job_id, job] : jobs) {
    if (job.steps.empty()) continue;
    auto it = detectors_.try_emplace({rule_index, job_id}, ParamsOf(rule)).first;
    const Detection detection = it->second.Observe(job.steps, now);
    if (detection.verdict != AnomalyVerdict::kNone) {
      DecideAnomalyJob(rule_index, job_id, job, detection);
    }
  }
}

SlotOutcome ScheduleDriver::AnomalyOutcome(size_t rule_index, const std::string& job_id,
                                           const Detection& detection, absl::Duration estimate) {
  const ScheduleRule& rule = options_.rules[rule_index];
  const absl::Time now = deps_.clock->Now();
  if (detection.verdict == AnomalyVerdict::kCoolingDown) return SlotOutcome::kCoolDown;
  if (InBlackout(rule, now, now + std::max(estimate, absl::Seconds(1)))) {
    return SlotOutcome::kBlackout;
  }
  auto& [day, count] = anomaly_captures_[{rule_index, job_id}];
  const absl::CivilDay today = absl::ToCivilDay(now, absl::UTCTimeZone());
  if (day != today) {
    day = today;
    count = 0;
  }
  if (rule.daily_cap != 0 && count >= rule.daily_cap) return SlotOutcome::kHostDailyCap;
  return LocalSlotOutcome(options_, Usage(), estimate);
}

void ScheduleDriver::DecideAnomalyJob(size_t rule_index, const std::string& job_id,
                                      const AnomalyJob& job, const Detection& detection) {
  const ScheduleRule& rule = options_.rules[rule_index];
  const absl::Time now = deps_.clock->Now();
  const AnomalyDecision decision = DecideAnomaly(
      options_.seed, rule, job_id, detection.anomaly.step, job.max_step + kStepMargin, now);
  // A step window's time, at the median step time (unknown: one step).
  const absl::Duration step_time = std::max(detection.anomaly.median, absl::Nanoseconds(1));
  const absl::Duration estimate =
      rule.window_steps > 0 ? step_time * static_cast<int64_t>(rule.window_steps) : rule.window;
  const SlotOutcome outcome = AnomalyOutcome(rule_index, job_id, detection, estimate);
  if (outcome != SlotOutcome::kCapture) {
    Record(AnomalyEvent(rule, job_id, decision, detection.anomaly, outcome, now));
    return;
  }
  for (int32_t pid : job.without) {
    Event skip =
        AnomalyEvent(rule, job_id, decision, detection.anomaly, SlotOutcome::kNoStepCounter, now);
    skip.pid = pid;
    Record(std::move(skip));
  }
  capture_time_today_ += estimate;
  ++anomaly_captures_[{rule_index, job_id}].second;
  std::vector<int32_t> pids;
  for (const ProcessSteps& p : job.steps) pids.push_back(p.pid);
  RequestAnomalyCapture(rule, job_id, decision, detection.anomaly, pids);
}

void ScheduleDriver::RequestAnomalyCapture(const ScheduleRule& rule, const std::string& job_id,
                                           const AnomalyDecision& decision, const Anomaly& anomaly,
                                           const std::vector<int32_t>& pids) {
  v1::TraceRequest request;
  request.mutable_selector()->set_job_id(job_id);
  for (int32_t pid : pids) request.mutable_selector()->add_pids(pid);
  request.mutable_selector()->set_include_helpers(rule.selector.include_helpers());
  request.set_trace_id(decision.trace_id);
  if (rule.window_steps > 0) {
    request.set_iterations(rule.window_steps);
    request.set_start_step(decision.first_step);
  } else {
    *request.mutable_duration() = ToProtoDuration(rule.window);
  }
  for (const std::string& activity : rule.activities) request.add_activities(activity);
  const absl::Time now = deps_.clock->Now();
  Event event = AnomalyEvent(rule, job_id, decision, anomaly, SlotOutcome::kCapture, now);
  absl::StatusOr<std::string> started = deps_.core->StartTrace(
      request, AnomalyTraceTrigger(rule, decision, anomaly, fingerprint_, now), ObserverFor(event));
  if (!started.ok()) {
    event.outcome = SlotOutcome::kRefused;
    event.error = std::string(started.status().message());
    LogWarning("anomaly trace not started", {{"rule", rule.name},
                                             {"job", job_id},
                                             {"anomaly", event.anomaly},
                                             {"error", started.status().message()}});
  } else {
    LogInfo("anomaly trace", {{"trace_id", decision.trace_id},
                              {"rule", rule.name},
                              {"job", job_id},
                              {"anomaly", event.anomaly},
                              {"bucket", decision.bucket}});
  }
  Record(std::move(event));
}

}  // namespace gpuctl::daemon::scheduler
