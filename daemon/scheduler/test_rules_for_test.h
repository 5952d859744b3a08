#ifndef GPUCTL_DAEMON_SCHEDULER_TEST_RULES_FOR_TEST_H_
#define GPUCTL_DAEMON_SCHEDULER_TEST_RULES_FOR_TEST_H_

#include <string>

#include "absl/time/time.h"
#include "daemon/scheduler/schedule_options.h"

namespace gpuctl::daemon::scheduler {

// A valid time rule: job `job`, every `period`, `window` long.
inline ScheduleRule TimeRuleForTest(std::string name = "hourly", double probability = 0.2,
                                    absl::Duration period = absl::Hours(1),
                                    absl::Duration window = absl::Seconds(10)) {
  ScheduleRule rule;
  rule.name = std::move(name);
  rule.selector.set_job_id("42");
  rule.probability = probability;
  rule.period = period;
  rule.window = window;
  return rule;
}

inline ScheduleRule StepRuleForTest(uint64_t step_period = 1000, uint32_t window_steps = 10) {
  ScheduleRule rule;
  rule.name = "steps";
  rule.selector.mutable_labels()->insert({"team", "ml"});
  rule.probability = 0.5;
  rule.step_period = step_period;
  rule.window_steps = window_steps;
  return rule;
}

// An anomaly rule on job "42": steps slower than 3x the median or no step
// for 30 s, capturing `window_steps` steps (a 10 s window when 0).
inline ScheduleRule AnomalyRuleForTest(uint32_t window_steps = 5) {
  ScheduleRule rule;
  rule.name = "slow-steps";
  rule.selector.set_job_id("42");
  rule.probability = 1;
  rule.window_steps = window_steps;
  if (window_steps == 0) rule.window = absl::Seconds(10);
  rule.anomaly.enabled = true;
  rule.anomaly.slow_factor = 3;
  rule.anomaly.hang_after = absl::Seconds(30);
  rule.anomaly.cooldown = absl::Minutes(10);
  rule.anomaly.step_bucket = 100;
  rule.anomaly.min_samples = 4;
  return rule;
}

inline absl::Time UtcForTest(int year, int month, int day, int hour, int minute = 0,
                             int second = 0) {
  return absl::FromCivil(absl::CivilSecond(year, month, day, hour, minute, second),
                         absl::UTCTimeZone());
}

}  // namespace gpuctl::daemon::scheduler

#endif  // GPUCTL_DAEMON_SCHEDULER_TEST_RULES_FOR_TEST_H_
