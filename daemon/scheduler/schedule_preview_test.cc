#include "daemon/scheduler/schedule_preview.h"

#include <string>
#include <vector>

#include "daemon/scheduler/budget.h"
#include "daemon/scheduler/slot_decision.h"
#include "daemon/scheduler/test_rules_for_test.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon::scheduler {
namespace {

ScheduleOptions PreviewedSchedule(ScheduleRule rule) {
  return ScheduleOptions{.seed = "fleet", .rules = {std::move(rule)}, .max_duty_cycle = 1};
}

// The one-pass preview gives every drawn slot the outcome that the
// per-slot decision (what the driver applies) gives it, across a UTC
// midnight, with a daily cap and a blackout.
TEST(SchedulePreviewTest, AgreesWithThePerSlotDecision) {
  ScheduleRule rule = TimeRuleForTest("often", 0.3, absl::Minutes(10), absl::Seconds(30));
  rule.daily_cap = 20;
  rule.blackouts.push_back({.days = 0, .first_hour = 3, .end_hour = 5});
  const ScheduleOptions options = PreviewedSchedule(rule);
  const absl::Time from = UtcForTest(2026, 3, 1, 14, 7);
  const absl::Time to = from + absl::Hours(36);
  absl::StatusOr<Preview> preview = PreviewJob(options, "42", from, to, 100000);
  ASSERT_TRUE(preview.ok()) << preview.status();
  EXPECT_FALSE(preview->truncated);

  std::vector<std::pair<int64_t, SlotOutcome>> expected;
  for (int64_t s = SlotOf(rule.period, from) - 1; s <= SlotOf(rule.period, to); ++s) {
    const SlotDecision d = DecideSlot("fleet", rule, "42", s);
    if (!d.sampled || d.start < from || d.start >= to) continue;
    expected.emplace_back(s, SharedSlotOutcome("fleet", rule, "42", d));
  }
  std::vector<std::pair<int64_t, SlotOutcome>> got;
  for (const PreviewEntry& e : preview->entries) got.emplace_back(e.decision.slot, e.outcome);
  EXPECT_EQ(got, expected);
  int capped = 0;
  int blacked_out = 0;
  for (const auto& [slot, outcome] : got) {
    capped += outcome == SlotOutcome::kDailyCap;
    blacked_out += outcome == SlotOutcome::kBlackout;
  }
  EXPECT_GT(capped, 0);  // the cap binds on a day of 144 slots at p = 0.3
  EXPECT_GT(blacked_out, 0);
}

TEST(SchedulePreviewTest, OrdersRulesByStartAndLeavesOutOtherJobsAndStepRules) {
  ScheduleRule mine = TimeRuleForTest("mine", 0.5, absl::Minutes(5), absl::Seconds(10));
  ScheduleRule labelled = TimeRuleForTest("any-job", 0.5, absl::Minutes(7), absl::Seconds(10));
  labelled.selector.clear_job_id();
  labelled.selector.mutable_labels()->insert({"team", "ml"});
  ScheduleRule other = TimeRuleForTest("other", 1.0, absl::Minutes(5), absl::Seconds(10));
  other.selector.set_job_id("7");
  ScheduleOptions options{
      .seed = "fleet", .rules = {mine, labelled, other, StepRuleForTest()}, .max_duty_cycle = 1};
  const absl::Time from = UtcForTest(2026, 3, 1, 0);
  absl::StatusOr<Preview> preview = PreviewJob(options, "42", from, from + absl::Hours(6), 1000);
  ASSERT_TRUE(preview.ok()) << preview.status();
  ASSERT_GT(preview->entries.size(), 10u);
  bool saw[2] = {false, false};
  for (size_t i = 0; i < preview->entries.size(); ++i) {
    const PreviewEntry& e = preview->entries[i];
    ASSERT_LT(e.rule_index, 2u);
    saw[e.rule_index] = true;
    if (i > 0) {
      EXPECT_LE(preview->entries[i - 1].decision.start, e.decision.start);
    }
  }
  EXPECT_TRUE(saw[0] && saw[1]);

  absl::StatusOr<Preview> short_one = PreviewJob(options, "42", from, from + absl::Hours(6), 3);
  ASSERT_TRUE(short_one.ok());
  EXPECT_EQ(short_one->entries.size(), 3u);
  EXPECT_TRUE(short_one->truncated);
}

TEST(SchedulePreviewTest, RefusesARangeTooLongToHash) {
  const ScheduleOptions options =
      PreviewedSchedule(TimeRuleForTest("tiny", 0.01, absl::Seconds(1), absl::Milliseconds(10)));
  const absl::Time from = UtcForTest(2026, 3, 1, 0);
  EXPECT_TRUE(PreviewJob(options, "42", from, from + absl::Hours(1), 10).ok());
  absl::StatusOr<Preview> too_long =
      PreviewJob(options, "42", from, from + absl::Hours(24 * 7), 10);
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.status().message().find("rule \"tiny\""), std::string::npos)
      << too_long.status();
}

}  // namespace
}  // namespace gpuctl::daemon::scheduler
