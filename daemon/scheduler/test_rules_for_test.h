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

inline absl::Time UtcForTest(int year, int month, int day, int hour, int minute = 0,
                             int second = 0) {
  return absl::FromCivil(absl::CivilSecond(year, month, day, hour, minute, second),
                         absl::UTCTimeZone());
}

}  // namespace gpuctl::daemon::scheduler

#endif  // GPUCTL_DAEMON_SCHEDULER_TEST_RULES_FOR_TEST_H_
