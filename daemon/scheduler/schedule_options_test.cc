#include "daemon/scheduler/schedule_options.h"

#include <string>

#include "daemon/scheduler/test_rules_for_test.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon::scheduler {
namespace {

using ::testing::HasSubstr;

ScheduleOptions OneRule(ScheduleRule rule) {
  return ScheduleOptions{.seed = "seed", .rules = {std::move(rule)}};
}

std::string ErrorOf(const ScheduleOptions& options) {
  absl::Status s = ValidateSchedule(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

TEST(ScheduleOptionsTest, ValidRulesPass) {
  ScheduleOptions options = OneRule(TimeRuleForTest());
  options.rules.push_back(StepRuleForTest());
  options.max_duty_cycle = 0.01;
  options.rules[1].probability = 0.5;
  options.rules[1].window_steps = 10;  // 0.5 * 10 / 1000 = 0.005
  options.rules[0].activities = {"kernel", "memcpy"};
  EXPECT_TRUE(ValidateSchedule(options).ok()) << ValidateSchedule(options);
  EXPECT_TRUE(ValidateSchedule(ScheduleOptions{}).ok());
}

TEST(ScheduleOptionsTest, DutyCycle) {
  EXPECT_DOUBLE_EQ(DutyCycle(TimeRuleForTest("r", 0.2, absl::Hours(1), absl::Seconds(36))), 0.002);
  EXPECT_DOUBLE_EQ(DutyCycle(StepRuleForTest(1000, 100)), 0.05);
}

TEST(ScheduleOptionsTest, RuleAboveTheDutyCycleCeilingIsRefused) {
  ScheduleOptions options =
      OneRule(TimeRuleForTest("busy", 0.5, absl::Minutes(1), absl::Seconds(12)));
  options.max_duty_cycle = 0.05;
  EXPECT_THAT(ErrorOf(options), HasSubstr("rule \"busy\": duty cycle 0.1 "));
  EXPECT_THAT(ErrorOf(options), HasSubstr("above max_duty_cycle 0.05"));
  options.max_duty_cycle = 0.1;
  EXPECT_TRUE(ValidateSchedule(options).ok());
}

TEST(ScheduleOptionsTest, BadRulesAreRefusedNamingTheField) {
  auto refuse = [](ScheduleRule rule, absl::string_view what) {
    EXPECT_THAT(ErrorOf(OneRule(std::move(rule))), HasSubstr(what));
  };
  ScheduleRule r = TimeRuleForTest();
  r.name = "bad name";
  refuse(r, "a name is 1 to 64");
  r = TimeRuleForTest();
  r.probability = 0;
  refuse(r, "probability 0 must be more than 0");
  r.probability = 1.5;
  refuse(r, "probability 1.5");
  r = TimeRuleForTest();
  r.selector.Clear();
  refuse(r, "selector: needs a job, ranks or labels");
  r = TimeRuleForTest();
  r.selector.add_pids(7);
  refuse(r, "selector: pids and limit");
  r = TimeRuleForTest();
  r.selector.add_ranks()->set_first(3);
  r.selector.mutable_ranks(0)->set_last(1);
  refuse(r, "selector: ");
  r = TimeRuleForTest("r", 0.01, absl::Minutes(1), absl::Minutes(2));
  refuse(r, "window 2m must be more than 0 and at most the period");
  r = TimeRuleForTest("r", 0.01, absl::Milliseconds(500), absl::Milliseconds(100));
  refuse(r, "period 500ms is out of range");
  r = TimeRuleForTest();
  r.step_period = 100;
  r.window_steps = 10;
  refuse(r, "needs either period and window");
  r = TimeRuleForTest();
  r.step_period = 100;
  refuse(r, "needs either period and window");
  r = StepRuleForTest();
  r.window_steps = 0;
  refuse(r, "needs either period and window");
  r = StepRuleForTest(100, 200);
  refuse(r, "window_steps (200) must be at most step_period (100)");
  r = StepRuleForTest();
  r.daily_cap = 3;
  refuse(r, "daily_cap needs a time rule");
  r = TimeRuleForTest();
  r.blackouts.push_back({.first_hour = 17, .end_hour = 9});
  refuse(r, "blackout hours 17-9");
  r = TimeRuleForTest();
  r.activities = {"kernel", "telepathy"};
  refuse(r, "activities: unknown activity \"telepathy\"");
  // Host context (docs/host-context.md) is asked for by name as well.
  r = TimeRuleForTest();
  r.activities = {"kernel", "cpu", "sched"};
  EXPECT_TRUE(ValidateSchedule(OneRule(r)).ok());
}

TEST(ScheduleOptionsTest, ScheduleLevelChecks) {
  ScheduleOptions options = OneRule(TimeRuleForTest());
  options.seed = "";
  EXPECT_THAT(ErrorOf(options), HasSubstr("needs a seed"));
  options = OneRule(TimeRuleForTest());
  options.rules.push_back(TimeRuleForTest());
  EXPECT_THAT(ErrorOf(options), HasSubstr("rule \"hourly\": a second rule of this name"));
  options = OneRule(TimeRuleForTest());
  options.max_duty_cycle = 0;
  EXPECT_THAT(ErrorOf(options), HasSubstr("max_duty_cycle 0 must be"));
}

TEST(ScheduleFingerprintTest, SameScheduleSameFingerprint) {
  ScheduleOptions a = OneRule(TimeRuleForTest());
  a.rules[0].selector.mutable_labels()->insert({"b", "2"});
  a.rules[0].selector.mutable_labels()->insert({"a", "1"});
  ScheduleOptions b = OneRule(TimeRuleForTest());
  b.rules[0].selector.mutable_labels()->insert({"a", "1"});
  b.rules[0].selector.mutable_labels()->insert({"b", "2"});
  EXPECT_EQ(ScheduleFingerprint(a), ScheduleFingerprint(b));
  EXPECT_EQ(ScheduleFingerprint(a).size(), 64u);
}

// Two hosts running different schedules stand out by their fingerprints:
// every field that changes decisions or budgets changes it.
TEST(ScheduleFingerprintTest, AnyChangeChangesTheFingerprint) {
  const ScheduleOptions base = OneRule(TimeRuleForTest());
  const std::string fp = ScheduleFingerprint(base);
  auto differs = [&fp](const ScheduleOptions& changed) {
    return ScheduleFingerprint(changed) != fp;
  };
  ScheduleOptions o = base;
  o.seed = "other";
  EXPECT_TRUE(differs(o));
  o = base;
  o.rules[0].probability = 0.2000001;
  EXPECT_TRUE(differs(o));
  o = base;
  o.rules[0].period = absl::Minutes(61);
  EXPECT_TRUE(differs(o));
  o = base;
  o.rules[0].selector.set_job_id("43");
  EXPECT_TRUE(differs(o));
  o = base;
  o.rules[0].daily_cap = 1;
  EXPECT_TRUE(differs(o));
  o = base;
  o.rules[0].blackouts.push_back({.days = 1});
  EXPECT_TRUE(differs(o));
  o = base;
  o.capture_time_per_day = absl::Minutes(1);
  EXPECT_TRUE(differs(o));
  o = base;
  o.rules[0].activities = {"kernel"};
  EXPECT_TRUE(differs(o));
}

}  // namespace
}  // namespace gpuctl::daemon::scheduler
