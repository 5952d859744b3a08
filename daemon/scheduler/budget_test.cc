#include "daemon/scheduler/budget.h"

#include <map>
#include <string>

#include "daemon/scheduler/test_rules_for_test.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon::scheduler {
namespace {

constexpr uint8_t kSaturday = 1u << 5;
constexpr uint8_t kSunday = 1u << 6;

TEST(BlackoutTest, WeekdaysAndHoursInUtc) {
  ScheduleRule rule = TimeRuleForTest();
  rule.blackouts.push_back({.days = kSaturday | kSunday});      // all weekend
  rule.blackouts.push_back({.first_hour = 9, .end_hour = 17});  // office hours, every day
  const absl::Duration w = absl::Seconds(10);
  // 2026-12-05 is a Saturday.
  EXPECT_TRUE(InBlackout(rule, UtcForTest(2026, 12, 5, 3), UtcForTest(2026, 12, 5, 3) + w));
  EXPECT_TRUE(InBlackout(rule, UtcForTest(2026, 12, 6, 23), UtcForTest(2026, 12, 6, 23) + w));
  // Monday night is free, Monday 09:00-17:00 is not.
  EXPECT_FALSE(InBlackout(rule, UtcForTest(2026, 12, 7, 3), UtcForTest(2026, 12, 7, 3) + w));
  EXPECT_TRUE(InBlackout(rule, UtcForTest(2026, 12, 7, 9), UtcForTest(2026, 12, 7, 9) + w));
  EXPECT_TRUE(InBlackout(rule, UtcForTest(2026, 12, 7, 16, 59, 59),
                         UtcForTest(2026, 12, 7, 16, 59, 59) + w));
  EXPECT_FALSE(InBlackout(rule, UtcForTest(2026, 12, 7, 17), UtcForTest(2026, 12, 7, 17) + w));
  // A window that ends inside a blackout touches it; one ending at its
  // start does not.
  EXPECT_TRUE(
      InBlackout(rule, UtcForTest(2026, 12, 7, 8, 59, 55), UtcForTest(2026, 12, 7, 8, 59, 55) + w));
  EXPECT_FALSE(
      InBlackout(rule, UtcForTest(2026, 12, 7, 8, 59, 50), UtcForTest(2026, 12, 7, 8, 59, 50) + w));
  // Friday 23:59:55 runs into Saturday.
  EXPECT_TRUE(InBlackout(rule, UtcForTest(2026, 12, 4, 23, 59, 55),
                         UtcForTest(2026, 12, 4, 23, 59, 55) + w));
}

TEST(BlackoutTest, SampledSlotInBlackoutIsSkippedWithItsReason) {
  ScheduleRule rule = TimeRuleForTest("r", 1.0, absl::Hours(1), absl::Seconds(10));
  rule.blackouts.push_back({.first_hour = 0, .end_hour = 24});
  const SlotDecision d = DecideSlot("s", rule, "42", 498941);
  ASSERT_TRUE(d.sampled);
  EXPECT_EQ(SharedSlotOutcome("s", rule, "42", d), SlotOutcome::kBlackout);
  EXPECT_FALSE(IsLocalOutcome(SlotOutcome::kBlackout));
  EXPECT_EQ(SlotOutcomeName(SlotOutcome::kBlackout), "blackout");
}

// Walks a fake clock through two days, one slot at a time, as a driver
// would: at most daily_cap captures per UTC day, and the first ones of the
// day are the ones captured.
TEST(DailyCapTest, CapsCapturesPerUtcDay) {
  ScheduleRule rule = TimeRuleForTest("r", 0.3, absl::Minutes(10), absl::Seconds(5));
  rule.daily_cap = 5;
  ScheduleOptions options{.seed = "seed", .rules = {rule}};
  std::map<absl::CivilDay, int> captured;
  std::map<absl::CivilDay, int> drawn;
  const absl::Time begin = UtcForTest(2026, 12, 2, 0);
  for (absl::Time now = begin; now < begin + absl::Hours(48); now += rule.period) {
    const SlotVerdict v = DecideJobSlot(options, rule, "42", SlotOf(rule.period, now), {});
    const absl::CivilDay day = absl::ToCivilDay(now, absl::UTCTimeZone());
    if (v.decision.sampled) ++drawn[day];
    if (v.outcome == SlotOutcome::kCapture) {
      EXPECT_LT(captured[day], 5);
      ++captured[day];
    } else if (v.outcome == SlotOutcome::kDailyCap) {
      EXPECT_EQ(captured[day], 5) << "the cap stops captures only once it is reached";
    }
  }
  ASSERT_EQ(captured.size(), 2u);
  for (const auto& [day, n] : captured) {
    EXPECT_EQ(n, 5) << day;
    EXPECT_GT(drawn[day], 5) << "144 slots at p=0.3 draw far more than the cap";
  }
}

// Hosts that evaluate a slot alone, without having seen the earlier slots
// of the day (a host that just started), agree on the cap.
TEST(DailyCapTest, RestartMidDayAgreesWithAHostThatRanAllDay) {
  ScheduleRule rule = TimeRuleForTest("r", 0.5, absl::Minutes(5), absl::Seconds(5));
  rule.daily_cap = 3;
  rule.blackouts.push_back({.first_hour = 2, .end_hour = 3});
  ScheduleOptions options{.seed = "seed", .rules = {rule}};
  const absl::Time begin = UtcForTest(2026, 12, 2, 0);
  int captures = 0;
  for (absl::Time now = begin; now < begin + absl::Hours(24); now += rule.period) {
    const int64_t slot = SlotOf(rule.period, now);
    const SlotVerdict all_day = DecideJobSlot(options, rule, "42", slot, {});
    // A second host, built afresh at this instant.
    const ScheduleOptions fresh{.seed = "seed", .rules = {rule}};
    const SlotVerdict restarted = DecideJobSlot(fresh, fresh.rules[0], "42", slot, {});
    ASSERT_EQ(all_day.outcome, restarted.outcome);
    ASSERT_EQ(all_day.decision.trace_id, restarted.decision.trace_id);
    captures += all_day.outcome == SlotOutcome::kCapture;
  }
  EXPECT_EQ(captures, 3);
}

TEST(DailyCapTest, BlackoutSlotsDoNotUseTheCap) {
  ScheduleRule rule = TimeRuleForTest("r", 1.0, absl::Hours(1), absl::Seconds(5));
  rule.daily_cap = 2;
  rule.blackouts.push_back({.first_hour = 0, .end_hour = 12});
  ScheduleOptions options{.seed = "seed", .rules = {rule}};
  std::string outcomes;
  for (int hour = 10; hour < 16; ++hour) {
    const int64_t slot = SlotOf(rule.period, UtcForTest(2026, 12, 2, hour));
    const SlotOutcome o = DecideJobSlot(options, rule, "42", slot, {}).outcome;
    outcomes += o == SlotOutcome::kCapture ? 'C' : o == SlotOutcome::kBlackout ? 'B' : 'X';
  }
  EXPECT_EQ(outcomes, "BBCCXX");
}

TEST(LocalLimitTest, HostCaptureTimeAndStoreSpaceAreLocalSkips) {
  ScheduleRule rule = TimeRuleForTest("r", 1.0, absl::Hours(1), absl::Seconds(30));
  ScheduleOptions options{.seed = "seed",
                          .rules = {rule},
                          .capture_time_per_day = absl::Minutes(1),
                          .min_free_store_bytes = uint64_t{1} << 30};
  const int64_t slot = 498941;
  EXPECT_EQ(
      DecideJobSlot(options, rule, "42", slot, {.capture_time_today = absl::Seconds(30)}).outcome,
      SlotOutcome::kCapture);
  const SlotOutcome spent =
      DecideJobSlot(options, rule, "42", slot, {.capture_time_today = absl::Seconds(31)}).outcome;
  EXPECT_EQ(spent, SlotOutcome::kHostCaptureTime);
  EXPECT_TRUE(IsLocalOutcome(spent));
  EXPECT_NE(SlotOutcomeName(spent).find("local, may split a job"), absl::string_view::npos);
  const SlotOutcome full =
      DecideJobSlot(options, rule, "42", slot, {.free_store_bytes = uint64_t{1} << 29}).outcome;
  EXPECT_EQ(full, SlotOutcome::kStoreSpace);
  EXPECT_TRUE(IsLocalOutcome(full));
  // A shared skip comes first: a blackout is reported as such, not as a
  // local limit.
  rule.blackouts.push_back({});
  options.rules = {rule};
  EXPECT_EQ(DecideJobSlot(options, rule, "42", slot, {.free_store_bytes = 0}).outcome,
            SlotOutcome::kBlackout);
}

}  // namespace
}  // namespace gpuctl::daemon::scheduler
