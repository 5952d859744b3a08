#include "daemon/scheduler/schedule_options.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/core/selector.h"
#include "daemon/core/trace_request.h"
#include "daemon/scheduler/schedule_hash.h"

namespace gpuctl::daemon::scheduler {
namespace {

std::string FormatProbability(double p) { return absl::StrFormat("%.17g", p); }

bool IsRuleNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

absl::Status RuleError(const ScheduleRule& rule, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("rule ", QuoteExcerpt(rule.name), ": ", message));
}

absl::Status ValidateRuleSelector(const ScheduleRule& rule) {
  const v1::ProcessSelector& selector = rule.selector;
  if (selector.pids_size() > 0 || selector.limit() != 0 || selector.allow_multiple_jobs()) {
    return RuleError(rule,
                     "selector: pids and limit name processes of one host; use job, "
                     "ranks and labels");
  }
  if (!HasCriterion(selector)) {
    return RuleError(rule, "selector: needs a job, ranks or labels");
  }
  if (absl::Status s = ValidateSelector(selector); !s.ok()) {
    return RuleError(rule, absl::StrCat("selector: ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ValidateRuleWindow(const ScheduleRule& rule) {
  const bool time_rule = rule.period > absl::ZeroDuration() || rule.window > absl::ZeroDuration();
  const bool step_rule = rule.step_period > 0 || rule.window_steps > 0;
  if (time_rule == step_rule || (step_rule && (rule.step_period == 0 || rule.window_steps == 0))) {
    return RuleError(rule,
                     "needs either period and window (a time rule) or step_period and "
                     "window_steps (a step rule)");
  }
  if (rule.step_aligned()) {
    if (rule.step_period > kMaxStepPeriod) {
      return RuleError(rule, absl::StrCat("step_period is more than ", kMaxStepPeriod));
    }
    if (rule.window_steps > kMaxIterations || rule.window_steps > rule.step_period) {
      return RuleError(
          rule, absl::StrCat("window_steps (", rule.window_steps, ") must be at most step_period (",
                             rule.step_period, ") and ", kMaxIterations));
    }
    if (rule.daily_cap != 0) {
      return RuleError(rule,
                       "daily_cap needs a time rule: hosts agree on steps, not on the "
                       "day a step falls in");
    }
    return absl::OkStatus();
  }
  if (rule.period < kMinPeriod || rule.period > kMaxPeriod) {
    return RuleError(rule, absl::StrCat("period ", absl::FormatDuration(rule.period),
                                        " is out of range (1s to 7d)"));
  }
  if (rule.window <= absl::ZeroDuration() || rule.window > rule.period ||
      rule.window > kMaxScheduledWindow) {
    return RuleError(rule, absl::StrCat("window ", absl::FormatDuration(rule.window),
                                        " must be more than 0 and at most the period (",
                                        absl::FormatDuration(rule.period), ") and 1h"));
  }
  return absl::OkStatus();
}

absl::Status ValidateAnomalyWindow(const ScheduleRule& rule) {
  if (rule.period > absl::ZeroDuration() || rule.step_period > 0) {
    return RuleError(rule,
                     "an anomaly rule has no period or step_period: it captures when the "
                     "anomaly happens");
  }
  const bool time_window = rule.window > absl::ZeroDuration();
  if (time_window == (rule.window_steps > 0)) {
    return RuleError(rule, "an anomaly rule needs either window (a time) or window_steps");
  }
  if (time_window && rule.window > kMaxScheduledWindow) {
    return RuleError(
        rule, absl::StrCat("window ", absl::FormatDuration(rule.window), " is more than 1h"));
  }
  if (rule.window_steps > kMaxIterations) {
    return RuleError(rule, absl::StrCat("window_steps is more than ", kMaxIterations));
  }
  return absl::OkStatus();
}

absl::Status ValidateAnomaly(const ScheduleRule& rule) {
  const AnomalyTrigger& a = rule.anomaly;
  if (rule.probability != 1) {
    return RuleError(rule, "an anomaly rule captures every anomaly: leave probability out");
  }
  if (absl::Status s = ValidateAnomalyWindow(rule); !s.ok()) return s;
  if (a.slow_factor == 0 && a.hang_after == absl::ZeroDuration()) {
    return RuleError(rule, "anomaly: needs slow_factor, hang_after or both");
  }
  if (a.slow_factor != 0 && !(a.slow_factor > 1 && a.slow_factor <= kMaxSlowFactor)) {
    return RuleError(rule, absl::StrCat("anomaly.slow_factor ", FormatProbability(a.slow_factor),
                                        " must be more than 1 and at most ", kMaxSlowFactor));
  }
  if (a.hang_after != absl::ZeroDuration() &&
      (a.hang_after < kMinHangAfter || a.hang_after > kMaxHangAfter)) {
    return RuleError(rule, absl::StrCat("anomaly.hang_after ", absl::FormatDuration(a.hang_after),
                                        " is out of range (1s to 24h)"));
  }
  if (a.cooldown < kMinCooldown || a.cooldown > kMaxCooldown || a.cooldown < rule.window) {
    return RuleError(rule, absl::StrCat("anomaly.cooldown ", absl::FormatDuration(a.cooldown),
                                        " must be 1s to 7d and at least the window"));
  }
  if (a.min_samples < 1 || a.min_samples > kMaxMinSamples) {
    return RuleError(rule, absl::StrCat("anomaly.min_samples must be 1 to ", kMaxMinSamples));
  }
  if (a.step_bucket < 1 || a.step_bucket > kMaxStepPeriod) {
    return RuleError(rule, absl::StrCat("anomaly.step_bucket must be 1 to ", kMaxStepPeriod));
  }
  return absl::OkStatus();
}

absl::Status ValidateBlackouts(const ScheduleRule& rule) {
  if (rule.blackouts.size() > kMaxBlackouts) {
    return RuleError(rule, absl::StrCat("more than ", kMaxBlackouts, " blackouts"));
  }
  for (const Blackout& b : rule.blackouts) {
    if (b.days > 0x7f) return RuleError(rule, "blackout days hold only the 7 weekdays");
    if (b.first_hour < 0 || b.end_hour > 24 || b.first_hour >= b.end_hour) {
      return RuleError(rule, absl::StrCat("blackout hours ", b.first_hour, "-", b.end_hour,
                                          " must satisfy 0 <= first < end <= 24"));
    }
  }
  return absl::OkStatus();
}

// The core's own checks of what the rule will ask for (activities).
absl::Status ValidateRuleActivities(const ScheduleRule& rule) {
  v1::TraceRequest request;
  request.mutable_selector()->set_job_id("schedule");
  request.mutable_duration()->set_seconds(1);
  for (const std::string& activity : rule.activities) request.add_activities(activity);
  absl::StatusOr<TracePlan> plan =
      PlanTrace(request, absl::UnixEpoch() + absl::Hours(1),
                {.max_duration = absl::Hours(1), .start_delay = absl::ZeroDuration()});
  if (!plan.ok()) return RuleError(rule, absl::StrCat("activities: ", plan.status().message()));
  return absl::OkStatus();
}

}  // namespace

double DutyCycle(const ScheduleRule& rule) {
  if (rule.anomaly_triggered()) {
    return rule.anomaly.cooldown <= absl::ZeroDuration()
               ? 0
               : absl::FDivDuration(rule.window, rule.anomaly.cooldown);
  }
  if (rule.step_aligned()) {
    return rule.step_period == 0 ? 0
                                 : rule.probability * static_cast<double>(rule.window_steps) /
                                       static_cast<double>(rule.step_period);
  }
  if (rule.period <= absl::ZeroDuration()) return 0;
  return rule.probability * absl::FDivDuration(rule.window, rule.period);
}

absl::Status ValidateRule(const ScheduleRule& rule) {
  if (rule.name.empty() || rule.name.size() > kMaxRuleNameBytes ||
      !std::all_of(rule.name.begin(), rule.name.end(), IsRuleNameChar)) {
    return RuleError(rule, absl::StrCat("a name is 1 to ", kMaxRuleNameBytes,
                                        " letters, digits, '.', '_' or '-'"));
  }
  if (rule.anomaly_triggered()) {
    if (absl::Status s = ValidateAnomaly(rule); !s.ok()) return s;
  } else if (!(rule.probability > 0 && rule.probability <= 1)) {
    return RuleError(rule, absl::StrCat("probability ", FormatProbability(rule.probability),
                                        " must be more than 0 and at most 1"));
  }
  if (absl::Status s = ValidateRuleSelector(rule); !s.ok()) return s;
  if (!rule.anomaly_triggered()) {
    if (absl::Status s = ValidateRuleWindow(rule); !s.ok()) return s;
  }
  if (absl::Status s = ValidateBlackouts(rule); !s.ok()) return s;
  return ValidateRuleActivities(rule);
}

absl::Status ValidateSchedule(const ScheduleOptions& options) {
  if (options.rules.size() > kMaxScheduleRules) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", kMaxScheduleRules, " rules"));
  }
  if (!(options.max_duty_cycle > 0 && options.max_duty_cycle <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("max_duty_cycle ",
                                                   FormatProbability(options.max_duty_cycle),
                                                   " must be more than 0 and at most 1"));
  }
  if (options.enabled() && options.seed.empty()) {
    return absl::InvalidArgumentError(
        "a schedule with rules needs a seed (the same on every host)");
  }
  if (options.seed.size() > kMaxSeedBytes) {
    return absl::InvalidArgumentError(absl::StrCat("seed is more than ", kMaxSeedBytes, " bytes"));
  }
  absl::flat_hash_set<std::string> names;
  for (const ScheduleRule& rule : options.rules) {
    if (absl::Status s = ValidateRule(rule); !s.ok()) return s;
    if (!names.insert(rule.name).second) return RuleError(rule, "a second rule of this name");
    if (DutyCycle(rule) > options.max_duty_cycle) {
      return RuleError(rule,
                       absl::StrFormat("duty cycle %.4g (probability x window / period) is above "
                                       "max_duty_cycle %.4g",
                                       DutyCycle(rule), options.max_duty_cycle));
    }
  }
  return absl::OkStatus();
}

std::string CanonicalScheduleText(const ScheduleOptions& options) {
  std::string text = "gpuctl-schedule-v1\n";
  absl::StrAppend(&text, "seed=", absl::CHexEscape(options.seed), "\n");
  absl::StrAppend(&text, "max_duty_cycle=", FormatProbability(options.max_duty_cycle), "\n");
  absl::StrAppend(&text, "capture_time_per_day_ms=",
                  absl::ToInt64Milliseconds(options.capture_time_per_day), "\n");
  absl::StrAppend(&text, "min_free_store_bytes=", options.min_free_store_bytes, "\n");
  for (const ScheduleRule& r : options.rules) {
    absl::StrAppend(&text, "rule=", absl::CHexEscape(r.name), "\n");
    // Deterministic: map fields in a fixed (sorted) order.
    absl::StrAppend(&text, " selector=", absl::CHexEscape(DescribeSelector(r.selector)),
                    r.selector.include_helpers() ? " +helpers" : "", "\n");
    absl::StrAppend(&text, " probability=", FormatProbability(r.probability), "\n");
    absl::StrAppend(&text, " period_ms=", absl::ToInt64Milliseconds(r.period),
                    " window_ms=", absl::ToInt64Milliseconds(r.window), "\n");
    absl::StrAppend(&text, " step_period=", r.step_period, " window_steps=", r.window_steps, "\n");
    absl::StrAppend(&text, " activities=", absl::StrJoin(r.activities, ","), "\n");
    for (const Blackout& b : r.blackouts) {
      absl::StrAppend(&text, " blackout=", b.days, ":", b.first_hour, "-", b.end_hour, "\n");
    }
    absl::StrAppend(&text, " min_step=", r.min_step, " daily_cap=", r.daily_cap, "\n");
    // Only anomaly rules carry this line: other rules' text is unchanged.
    if (r.anomaly_triggered()) {
      const AnomalyTrigger& a = r.anomaly;
      absl::StrAppend(&text, " anomaly slow_factor=", FormatProbability(a.slow_factor),
                      " hang_after_ms=", absl::ToInt64Milliseconds(a.hang_after),
                      " min_samples=", a.min_samples,
                      " cooldown_ms=", absl::ToInt64Milliseconds(a.cooldown),
                      " step_bucket=", a.step_bucket, "\n");
    }
  }
  return text;
}

std::string ScheduleFingerprint(const ScheduleOptions& options) {
  return Sha256Hex(CanonicalScheduleText(options));
}

}  // namespace gpuctl::daemon::scheduler
