// ScheduleDriver's report of itself: GetSchedule and its preview.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/civil_time.h"
#include "daemon/core/proto_time.h"
#include "daemon/core/selector.h"
#include "daemon/scheduler/schedule_driver.h"
#include "daemon/scheduler/schedule_preview.h"

namespace gpuctl::daemon::scheduler {
namespace {

// "Sat,Sun 00-06 UTC", "every day 09-17 UTC".
std::string BlackoutText(const Blackout& b) {
  static constexpr const char* kDays[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
  std::vector<std::string> days;
  for (int d = 0; d < 7; ++d) {
    if ((b.days & (1u << d)) != 0) days.emplace_back(kDays[d]);
  }
  return absl::StrCat(b.days == 0 ? "every day" : absl::StrJoin(days, ","), " ",
                      absl::Dec(b.first_hour, absl::kZeroPad2), "-",
                      absl::Dec(b.end_hour, absl::kZeroPad2), " UTC");
}

// "steps slower than 3x the median or no step for 1m; cool-down 30m".
std::string AnomalyText(const AnomalyTrigger& a) {
  std::vector<std::string> what;
  if (a.slow_factor > 0) {
    what.push_back(absl::StrCat("steps slower than ", a.slow_factor, "x the median"));
  }
  if (a.hang_after > absl::ZeroDuration()) {
    what.push_back(absl::StrCat("no step for ", absl::FormatDuration(a.hang_after)));
  }
  return absl::StrCat(absl::StrJoin(what, " or "), "; cool-down ",
                      absl::FormatDuration(a.cooldown));
}

v1::ScheduleRuleInfo RuleInfo(const ScheduleRule& rule) {
  v1::ScheduleRuleInfo info;
  info.set_name(rule.name);
  info.set_selector(DescribeSelector(rule.selector));
  info.set_probability(rule.probability);
  if (rule.anomaly_triggered()) {
    info.set_window_steps(rule.window_steps);
    if (rule.window > absl::ZeroDuration()) *info.mutable_window() = ToProtoDuration(rule.window);
    info.set_anomaly(AnomalyText(rule.anomaly));
  } else if (rule.step_aligned()) {
    info.set_step_period(rule.step_period);
    info.set_window_steps(rule.window_steps);
  } else {
    *info.mutable_period() = ToProtoDuration(rule.period);
    *info.mutable_window() = ToProtoDuration(rule.window);
  }
  info.set_duty_cycle(DutyCycle(rule));
  info.set_daily_cap(rule.daily_cap);
  info.set_min_step(rule.min_step);
  for (const std::string& a : rule.activities) info.add_activities(a);
  for (const Blackout& b : rule.blackouts) info.add_blackouts(BlackoutText(b));
  // Time, step and anomaly rules are all started by this daemon.
  info.set_driven(true);
  return info;
}

}  // namespace

absl::StatusOr<v1::GetScheduleResponse> ScheduleDriver::GetSchedule(
    const v1::GetScheduleRequest& request) {
  if (request.next_slots() > kMaxNextSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("next_slots ", request.next_slots(), " is above ", kMaxNextSlots));
  }
  v1::GetScheduleResponse response;
  response.set_enabled(options_.enabled());
  response.set_fingerprint(fingerprint_);
  response.set_max_duty_cycle(options_.max_duty_cycle);
  *response.mutable_now() = ToProtoTimestamp(deps_.clock->Now());
  *response.mutable_capture_time_per_day() = ToProtoDuration(options_.capture_time_per_day);
  const absl::CivilDay today = absl::ToCivilDay(deps_.clock->Now(), absl::UTCTimeZone());
  *response.mutable_capture_time_today() =
      ToProtoDuration(today == usage_day_ ? capture_time_today_ : absl::ZeroDuration());
  response.set_min_free_store_bytes(options_.min_free_store_bytes);
  response.set_wakeups(wakeups_);
  ReportRules(request.next_slots() == 0 ? kDefaultNextSlots : request.next_slots(), response);
  ReportEvents(response);
  return response;
}

void ScheduleDriver::ReportRules(uint32_t next_slots, v1::GetScheduleResponse& response) const {
  const absl::Time now = deps_.clock->Now();
  for (const ScheduleRule& rule : options_.rules) {
    v1::ScheduleRuleInfo* info = response.add_rules();
    *info = RuleInfo(rule);
    if (!rule.time_driven()) continue;
    for (uint32_t i = 1; i <= next_slots; ++i) {
      *info->add_next_slots() =
          ToProtoTimestamp(SlotStart(rule.period, SlotOf(rule.period, now) + i));
    }
  }
}

void ScheduleDriver::ReportEvents(v1::GetScheduleResponse& response) const {
  const absl::TimeZone utc = absl::UTCTimeZone();
  const absl::CivilDay today = absl::ToCivilDay(deps_.clock->Now(), utc);
  for (const Event& e : events_) {
    v1::ScheduleEvent* out = response.add_events();
    out->set_rule(e.rule);
    out->set_job_id(e.job_id);
    out->set_slot(e.slot);
    out->set_first_step(e.first_step);
    out->set_pid(e.pid);
    out->set_anomaly(e.anomaly);
    out->set_outcome(std::string(SlotOutcomeName(e.outcome)));
    out->set_captured(e.outcome == SlotOutcome::kCapture);
    out->set_local(IsLocalOutcome(e.outcome));
    out->set_trace_id(e.trace_id);
    out->set_error(e.error);
    *out->mutable_decided_at() = ToProtoTimestamp(e.decided_at);
    *out->mutable_start_time() = ToProtoTimestamp(e.start);
    if (absl::ToCivilDay(e.decided_at, utc) != today) continue;
    if (e.outcome == SlotOutcome::kCapture) {
      response.set_captures_today(response.captures_today() + 1);
    } else {
      response.set_skips_today(response.skips_today() + 1);
    }
  }
}

ScheduleReporter::PreviewTask ScheduleDriver::Preview(const v1::GetScheduleRequest& request) const {
  return [options = options_, request](v1::GetScheduleResponse& response) {
    return AddPreview(options, request, response);
  };
}

absl::Status AddPreview(const ScheduleOptions& options, const v1::GetScheduleRequest& request,
                        v1::GetScheduleResponse& response) {
  if (request.preview_job().empty()) return absl::OkStatus();
  absl::Duration span = ScheduleDriver::kDefaultPreview;
  if (request.has_preview_duration()) {
    absl::StatusOr<absl::Duration> d = FromProtoDuration(request.preview_duration());
    if (!d.ok()) return d.status();
    span = *d;
  }
  if (span <= absl::ZeroDuration() || span > ScheduleDriver::kMaxPreview) {
    return absl::InvalidArgumentError(
        absl::StrCat("preview_duration ", absl::FormatDuration(span), " is outside (0, ",
                     absl::FormatDuration(ScheduleDriver::kMaxPreview), "]"));
  }
  absl::StatusOr<absl::Time> now = FromProtoTimestamp(response.now(), "now");
  if (!now.ok()) return now.status();
  absl::StatusOr<Preview> preview = PreviewJob(options, request.preview_job(), *now, *now + span,
                                               ScheduleDriver::kMaxPreviewSlots);
  if (!preview.ok()) return preview.status();
  for (const PreviewEntry& e : preview->entries) {
    const ScheduleRule& rule = options.rules[e.rule_index];
    v1::PreviewSlot* out = response.add_preview();
    out->set_rule(rule.name);
    out->set_slot(e.decision.slot);
    *out->mutable_start_time() = ToProtoTimestamp(e.decision.start);
    *out->mutable_window() = ToProtoDuration(rule.window);
    out->set_trace_id(e.decision.trace_id);
    out->set_outcome(std::string(SlotOutcomeName(e.outcome)));
  }
  response.set_preview_truncated(preview->truncated);
  return absl::OkStatus();
}

}  // namespace gpuctl::daemon::scheduler
