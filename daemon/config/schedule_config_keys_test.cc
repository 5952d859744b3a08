// schedule: rules read into scheduler::ScheduleOptions, every value checked
// and reported at its key, the duty-cycle ceiling, the fingerprint.
#include <string>

#include "daemon/config/daemon_config.h"
#include "daemon/scheduler/schedule_options.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kFullSchedule[] = R"(schedule:
  seed: fleet-2026
  max_duty_cycle: 0.02
  capture_time_per_day: 10m
  min_free_store_bytes: 5GiB
  rules:
    - name: hourly
      selector:
        job: "42"
        ranks: "0-3,8"
        labels: {team: ml, k8s.namespace: train}
        include_helpers: true
      period: 1h
      window: 10s
      probability: 0.5
      activities: [kernel, memcpy]
      blackout:
        - {days: [sat, sun]}
        - {days: [mon], hours: "9-17"}
      min_step: 100
      daily_cap: 4
    - name: steps
      selector: {labels: {team: ml}}
      step_period: 1000
      window_steps: 10
      probability: 0.1
)";

absl::StatusOr<DaemonOptions> ParseSchedule(const std::string& text) {
  DaemonOptions options;
  absl::StatusOr<ConfigLocations> where = ParseDaemonConfig(text, "gpuctld.yaml", &options);
  if (!where.ok()) return where.status();
  return options;
}

std::string ScheduleError(const std::string& text) {
  absl::StatusOr<DaemonOptions> options = ParseSchedule(text);
  return options.ok() ? "(accepted)" : std::string(options.status().message());
}

// A one-rule schedule with `rule_lines` (indented under the rule).
std::string OneRuleSchedule(const std::string& rule_lines, const std::string& top = "") {
  return "schedule:\n  seed: s\n" + top + "  rules:\n    - name: r\n" + rule_lines;
}

constexpr char kTimeRule[] =
    "      selector: {job: \"42\"}\n"
    "      period: 1h\n"
    "      window: 10s\n"
    "      probability: 0.1\n";

TEST(ScheduleConfigTest, AbsentMeansNoSchedule) {
  absl::StatusOr<DaemonOptions> options = ParseSchedule("store:\n  path: /t\n");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_FALSE(options->schedule.enabled());
}

TEST(ScheduleConfigTest, ReadsEveryKey) {
  absl::StatusOr<DaemonOptions> options = ParseSchedule(kFullSchedule);
  ASSERT_TRUE(options.ok()) << options.status();
  const scheduler::ScheduleOptions& s = options->schedule;
  EXPECT_EQ(s.seed, "fleet-2026");
  EXPECT_EQ(s.max_duty_cycle, 0.02);
  EXPECT_EQ(s.capture_time_per_day, absl::Minutes(10));
  EXPECT_EQ(s.min_free_store_bytes, uint64_t{5} << 30);
  ASSERT_EQ(s.rules.size(), 2u);
  const scheduler::ScheduleRule& r = s.rules[0];
  EXPECT_EQ(r.name, "hourly");
  EXPECT_EQ(r.selector.job_id(), "42");
  ASSERT_EQ(r.selector.ranks_size(), 2);
  EXPECT_EQ(r.selector.ranks(0).first(), 0);
  EXPECT_EQ(r.selector.ranks(0).last(), 3);
  EXPECT_EQ(r.selector.ranks(1).first(), 8);
  EXPECT_EQ(r.selector.labels().at("k8s.namespace"), "train");
  EXPECT_TRUE(r.selector.include_helpers());
  EXPECT_EQ(r.period, absl::Hours(1));
  EXPECT_EQ(r.window, absl::Seconds(10));
  EXPECT_EQ(r.probability, 0.5);
  EXPECT_EQ(r.activities, (std::vector<std::string>{"kernel", "memcpy"}));
  ASSERT_EQ(r.blackouts.size(), 2u);
  EXPECT_EQ(r.blackouts[0].days, (1u << 5) | (1u << 6));
  EXPECT_EQ(r.blackouts[0].first_hour, 0);
  EXPECT_EQ(r.blackouts[0].end_hour, 24);
  EXPECT_EQ(r.blackouts[1].days, 1u);
  EXPECT_EQ(r.blackouts[1].first_hour, 9);
  EXPECT_EQ(r.blackouts[1].end_hour, 17);
  EXPECT_EQ(r.min_step, 100u);
  EXPECT_EQ(r.daily_cap, 4u);
  EXPECT_TRUE(s.rules[1].step_aligned());
  EXPECT_EQ(s.rules[1].step_period, 1000u);
  EXPECT_EQ(s.rules[1].window_steps, 10u);
}

// The pool converting scheduled traces: a thread count, a nice level or
// SCHED_IDLE; left out of the fingerprint.
TEST(ScheduleConfigTest, ReadsTheWorkerPool) {
  absl::StatusOr<DaemonOptions> defaults = ParseSchedule(OneRuleSchedule(kTimeRule));
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->schedule.worker_threads, 1);
  EXPECT_EQ(defaults->schedule.worker_nice, 19);
  EXPECT_FALSE(defaults->schedule.worker_idle);
  absl::StatusOr<DaemonOptions> nice =
      ParseSchedule(OneRuleSchedule(kTimeRule, "  worker_threads: 3\n  worker_nice: 5\n"));
  ASSERT_TRUE(nice.ok()) << nice.status();
  EXPECT_EQ(nice->schedule.worker_threads, 3);
  EXPECT_EQ(nice->schedule.worker_nice, 5);
  EXPECT_EQ(scheduler::ScheduleFingerprint(nice->schedule),
            scheduler::ScheduleFingerprint(defaults->schedule));
  absl::StatusOr<DaemonOptions> idle =
      ParseSchedule(OneRuleSchedule(kTimeRule, "  worker_nice: idle\n"));
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_TRUE(idle->schedule.worker_idle);
  EXPECT_THAT(ScheduleError(OneRuleSchedule(kTimeRule, "  worker_nice: 20\n")),
              HasSubstr("schedule.worker_nice: \"20\" is not a nice level from 0 to 19, or idle"));
  EXPECT_THAT(ScheduleError(OneRuleSchedule(kTimeRule, "  worker_nice: -1\n")),
              HasSubstr("schedule.worker_nice: \"-1\" is not a nice level"));
  EXPECT_THAT(ScheduleError(OneRuleSchedule(kTimeRule, "  worker_threads: 0\n")),
              HasSubstr("schedule.worker_threads: "));
  EXPECT_THAT(ScheduleError(OneRuleSchedule(kTimeRule, "  worker_threads: 65\n")),
              HasSubstr("schedule.worker_threads: "));
}

TEST(ScheduleConfigTest, ValuesAreCheckedAtTheirKey) {
  EXPECT_THAT(ScheduleError(OneRuleSchedule(std::string(kTimeRule) + "      probability: 2\n")),
              HasSubstr("probability: set twice"));
  EXPECT_THAT(ScheduleError(OneRuleSchedule("      probability: 1.5\n")),
              StartsWith("gpuctld.yaml:5: schedule.rules[0].probability: \"1.5\" is not a "
                         "fraction above 0 to 1"));
  EXPECT_THAT(ScheduleError(OneRuleSchedule("      probability: 1e-3\n")),
              HasSubstr("schedule.rules[0].probability: \"1e-3\" is not a fraction"));
  EXPECT_THAT(ScheduleError(OneRuleSchedule("      period: 1x\n")),
              HasSubstr("schedule.rules[0].period: "));
  EXPECT_THAT(ScheduleError(OneRuleSchedule("      selector: {ranks: \"0-x\"}\n")),
              HasSubstr("schedule.rules[0].selector.ranks: \"0-x\" is not a rank"));
  EXPECT_THAT(ScheduleError(OneRuleSchedule("      selector: {pids: [1]}\n")),
              HasSubstr("schedule.rules[0].selector.pids: unknown key (schedule.rules[0].selector "
                        "takes job, ranks, labels, include_helpers)"));
  EXPECT_THAT(ScheduleError(OneRuleSchedule("      selector: {labels: {\"bad key\": x}}\n")),
              HasSubstr("schedule.rules[0].selector.labels: label key \"bad key\""));
  EXPECT_THAT(ScheduleError(OneRuleSchedule("      blackout: [{days: [funday]}]\n")),
              HasSubstr("schedule.rules[0].blackout[0].days[0]: \"funday\" is not a weekday"));
  EXPECT_THAT(ScheduleError(OneRuleSchedule("      blackout: [{hours: \"17-9\"}]\n")),
              HasSubstr("schedule.rules[0].blackout[0].hours: \"17-9\" is not a range of UTC "
                        "hours"));
  EXPECT_THAT(ScheduleError(OneRuleSchedule("      colour: red\n")),
              HasSubstr("schedule.rules[0].colour: unknown key (schedule.rules[0] takes name, "
                        "selector, probability"));
  EXPECT_THAT(ScheduleError("schedule:\n  rules: {name: r}\n"),
              HasSubstr("schedule.rules: expected a list of rules, found a mapping"));
  EXPECT_THAT(ScheduleError("schedule:\n  rules: [r]\n"),
              HasSubstr("schedule.rules[0]: expected a rule"));
  EXPECT_THAT(ScheduleError(OneRuleSchedule(kTimeRule, "  max_duty_cycle: 0\n")),
              HasSubstr("schedule.max_duty_cycle: \"0\" is not a fraction above 0"));
}

TEST(ScheduleConfigTest, RulesAreCheckedAsAWhole) {
  EXPECT_THAT(
      ScheduleError(OneRuleSchedule("      selector: {job: \"42\"}\n      probability: 0.1\n")),
      StartsWith("gpuctld.yaml:4: schedule.rules[0]: rule \"r\": needs either period "
                 "and window"));
  EXPECT_THAT(
      ScheduleError(OneRuleSchedule(std::string(kTimeRule) + "      activities: [telepathy]\n")),
      HasSubstr("schedule.rules[0]: rule \"r\": activities: unknown activity "
                "\"telepathy\""));
  EXPECT_THAT(
      ScheduleError(OneRuleSchedule("      selector: {job: \"42\"}\n      step_period: 100\n"
                                    "      window_steps: 10\n      probability: 0.1\n"
                                    "      daily_cap: 2\n")),
      HasSubstr("daily_cap needs a time rule"));
  EXPECT_THAT(ScheduleError("schedule:\n  rules:\n    - name: r\n" + std::string(kTimeRule)),
              StartsWith("gpuctld.yaml:1: schedule: a schedule with rules needs a seed"));
}

// A rule whose duty cycle is above the ceiling stops gpuctld at startup,
// whichever order the file sets the ceiling and the rule in.
TEST(ScheduleConfigTest, DutyCycleCeilingRefusesARule) {
  const std::string busy =
      "      selector: {job: \"42\"}\n      period: 1m\n      window: 30s\n"
      "      probability: 0.5\n";
  EXPECT_THAT(ScheduleError(OneRuleSchedule(busy)),
              StartsWith("gpuctld.yaml:3: schedule.rules: rule \"r\": duty cycle 0.25 "
                         "(probability x window / period) is above max_duty_cycle 0.05"));
  EXPECT_EQ(ScheduleError(OneRuleSchedule(busy, "  max_duty_cycle: 0.25\n")), "(accepted)");
  EXPECT_EQ(ScheduleError("schedule:\n  rules:\n    - name: r\n" + busy +
                          "  seed: s\n  max_duty_cycle: 0.3\n"),
            "(accepted)");
}

TEST(ScheduleConfigTest, FingerprintIgnoresLayoutAndSeesChanges) {
  absl::StatusOr<DaemonOptions> a = ParseSchedule(kFullSchedule);
  absl::StatusOr<DaemonOptions> b = ParseSchedule(
      "schedule: {seed: fleet-2026, max_duty_cycle: 0.02, capture_time_per_day: 600s, "
      "min_free_store_bytes: 5368709120, rules: [\n"
      "  {name: hourly, probability: 0.5, period: 60m, window: 10000ms, daily_cap: 4,"
      "   selector: {labels: {k8s.namespace: train, team: ml}, ranks: \"0-3,8\", job: \"42\","
      "              include_helpers: true},"
      "   activities: [kernel, memcpy], min_step: 100,"
      "   blackout: [{days: [sun, sat]}, {hours: \"9-17\", days: [mon]}]},\n"
      "  {name: steps, selector: {labels: {team: ml}}, step_period: 1000, window_steps: 10,"
      "   probability: 0.1}]}\n");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(scheduler::ScheduleFingerprint(a->schedule),
            scheduler::ScheduleFingerprint(b->schedule));
  std::string changed = kFullSchedule;
  changed.replace(changed.find("probability: 0.5"), 16, "probability: 0.4");
  absl::StatusOr<DaemonOptions> c = ParseSchedule(changed);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(scheduler::ScheduleFingerprint(a->schedule),
            scheduler::ScheduleFingerprint(c->schedule));
}

}  // namespace
}  // namespace gpuctl::daemon
