// schedule.rules[].anomaly: an anomaly rule read and checked, each error
// naming its key.
#include <string>

#include "daemon/config/daemon_config.h"
#include "daemon/scheduler/schedule_options.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string AnomalySchedule(const std::string& rule_lines) {
  return "schedule:\n  seed: s\n  max_duty_cycle: 0.5\n  rules:\n    - name: slow\n"
         "      selector: {labels: {team: ml}}\n" +
         rule_lines;
}

absl::StatusOr<DaemonOptions> ParseAnomalyConfig(const std::string& text) {
  DaemonOptions options;
  absl::StatusOr<ConfigLocations> where = ParseDaemonConfig(text, "gpuctld.yaml", &options);
  if (!where.ok()) return where.status();
  return options;
}

std::string AnomalyConfigError(const std::string& text) {
  absl::StatusOr<DaemonOptions> options = ParseAnomalyConfig(text);
  return options.ok() ? "(accepted)" : std::string(options.status().message());
}

constexpr char kAnomalyRule[] =
    "      window_steps: 20\n"
    "      min_step: 50\n"
    "      daily_cap: 3\n"
    "      anomaly:\n"
    "        slow_factor: 2.5\n"
    "        hang_after: 2m\n"
    "        cooldown: 1h\n"
    "        min_samples: 16\n"
    "        step_bucket: 500\n";

TEST(AnomalyConfigTest, ReadsEveryKey) {
  absl::StatusOr<DaemonOptions> options = ParseAnomalyConfig(AnomalySchedule(kAnomalyRule));
  ASSERT_TRUE(options.ok()) << options.status();
  const scheduler::ScheduleRule& r = options->schedule.rules[0];
  EXPECT_TRUE(r.anomaly_triggered());
  EXPECT_FALSE(r.step_aligned());
  EXPECT_FALSE(r.time_driven());
  EXPECT_EQ(r.probability, 1) << "an anomaly rule captures every anomaly";
  EXPECT_EQ(r.window_steps, 20u);
  EXPECT_EQ(r.min_step, 50u);
  EXPECT_EQ(r.daily_cap, 3u);
  EXPECT_EQ(r.anomaly.slow_factor, 2.5);
  EXPECT_EQ(r.anomaly.hang_after, absl::Minutes(2));
  EXPECT_EQ(r.anomaly.cooldown, absl::Hours(1));
  EXPECT_EQ(r.anomaly.min_samples, 16u);
  EXPECT_EQ(r.anomaly.step_bucket, 500u);
}

TEST(AnomalyConfigTest, DefaultsAndATimeWindow) {
  absl::StatusOr<DaemonOptions> options =
      ParseAnomalyConfig(AnomalySchedule("      window: 10s\n      anomaly: {hang_after: 30s}\n"));
  ASSERT_TRUE(options.ok()) << options.status();
  const scheduler::ScheduleRule& r = options->schedule.rules[0];
  EXPECT_EQ(r.window, absl::Seconds(10));
  EXPECT_EQ(r.anomaly.slow_factor, 0);
  EXPECT_EQ(r.anomaly.cooldown, scheduler::kDefaultCooldown);
  EXPECT_EQ(r.anomaly.min_samples, scheduler::kDefaultMinSamples);
  EXPECT_EQ(r.anomaly.step_bucket, scheduler::kDefaultStepBucket);
}

TEST(AnomalyConfigTest, EachValueIsCheckedAtItsKey) {
  EXPECT_THAT(
      AnomalyConfigError(AnomalySchedule("      window: 10s\n      anomaly: {slow_factor: 1}\n")),
      HasSubstr("schedule.rules[0].anomaly.slow_factor: \"1\" is not a factor above 1 "
                "and at most 1000"));
  EXPECT_THAT(
      AnomalyConfigError(AnomalySchedule("      window: 10s\n      anomaly: {slow_factor: -3}\n")),
      HasSubstr("schedule.rules[0].anomaly.slow_factor: \"-3\" is not a factor"));
  EXPECT_THAT(AnomalyConfigError(
                  AnomalySchedule("      window: 10s\n      anomaly: {hang_after: 100ms}\n")),
              HasSubstr("schedule.rules[0].anomaly.hang_after: 100ms is out of range (1s to "));
  EXPECT_THAT(AnomalyConfigError(AnomalySchedule(
                  "      window: 10s\n      anomaly: {hang_after: 1m, cooldown: 8d}\n")),
              HasSubstr("schedule.rules[0].anomaly.cooldown: "));
  EXPECT_THAT(AnomalyConfigError(AnomalySchedule(
                  "      window: 10s\n      anomaly: {hang_after: 1m, min_samples: 0}\n")),
              HasSubstr("schedule.rules[0].anomaly.min_samples: "));
  EXPECT_THAT(AnomalyConfigError(AnomalySchedule(
                  "      window: 10s\n      anomaly: {hang_after: 1m, step_bucket: 0}\n")),
              HasSubstr("schedule.rules[0].anomaly.step_bucket: "));
  EXPECT_THAT(
      AnomalyConfigError(AnomalySchedule("      window: 10s\n      anomaly: {factor: 3}\n")),
      HasSubstr("schedule.rules[0].anomaly.factor: unknown key"));
}

TEST(AnomalyConfigTest, TheRuleIsCheckedAsAWhole) {
  EXPECT_THAT(AnomalyConfigError(AnomalySchedule("      window: 10s\n      anomaly: {}\n")),
              StartsWith("gpuctld.yaml:5: schedule.rules[0]: rule \"slow\": anomaly: needs "
                         "slow_factor, hang_after or both"));
  EXPECT_THAT(AnomalyConfigError(AnomalySchedule("      anomaly: {slow_factor: 3}\n")),
              HasSubstr("rule \"slow\": an anomaly rule needs either window (a time) or "
                        "window_steps"));
  EXPECT_THAT(AnomalyConfigError(AnomalySchedule(
                  "      window: 10s\n      period: 1h\n      anomaly: {slow_factor: 3}\n")),
              HasSubstr("an anomaly rule has no period or step_period"));
  EXPECT_THAT(AnomalyConfigError(AnomalySchedule(
                  "      window: 10s\n      probability: 0.5\n      anomaly: {slow_factor: 3}\n")),
              HasSubstr("an anomaly rule captures every anomaly: leave probability out"));
  EXPECT_THAT(AnomalyConfigError(AnomalySchedule(
                  "      window: 2m\n      anomaly: {slow_factor: 3, cooldown: 1m}\n")),
              HasSubstr("anomaly.cooldown 1m must be 1s to 7d and at least the window"));
  // window / cooldown is the rule's duty cycle.
  EXPECT_THAT(AnomalyConfigError(AnomalySchedule(
                  "      window: 1m\n      anomaly: {slow_factor: 3, cooldown: 90s}\n")),
              HasSubstr("duty cycle 0.6667"));
}

TEST(AnomalyConfigTest, TheAnomalySectionIsPartOfTheFingerprint) {
  absl::StatusOr<DaemonOptions> a = ParseAnomalyConfig(AnomalySchedule(kAnomalyRule));
  std::string other = kAnomalyRule;
  other.replace(other.find("2.5"), 3, "4");
  absl::StatusOr<DaemonOptions> b = ParseAnomalyConfig(AnomalySchedule(other));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(scheduler::ScheduleFingerprint(a->schedule),
            scheduler::ScheduleFingerprint(b->schedule));
  EXPECT_THAT(scheduler::CanonicalScheduleText(a->schedule),
              HasSubstr(" anomaly slow_factor=2.5 hang_after_ms=120000 min_samples=16 "
                        "cooldown_ms=3600000 step_bucket=500\n"));
}

}  // namespace
}  // namespace gpuctl::daemon
