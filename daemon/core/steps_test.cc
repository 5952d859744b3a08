#include "daemon/core/steps.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "gpuctl/v1/step_page.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

StepPageFields Page(uint64_t next_step, int64_t last_ns = 0, int64_t period_ns = 0) {
  StepPageFields f;
  f.magic = steps::kStepPageMagic;
  f.version = steps::kStepPageVersion;
  f.next_step = next_step;
  f.last_step_unix_ns = last_ns;
  f.period_ns = period_ns;
  return f;
}

TEST(PickStartStepTest, NextMultipleOfTheRoundupAboveTheLargestStepPlusMargin) {
  EXPECT_EQ(PickStartStep(10, 1, 2), 13u);
  EXPECT_EQ(PickStartStep(10, 0, 2), 13u) << "roundup 0 counts as 1";
  EXPECT_EQ(PickStartStep(10, 50, 2), 50u);
  EXPECT_EQ(PickStartStep(48, 50, 2), 100u) << "strictly above m + margin";
  EXPECT_EQ(PickStartStep(47, 50, 2), 50u);
  EXPECT_EQ(PickStartStep(1234, 100, 10), 1300u);
  EXPECT_EQ(PickStartStep(1290, 100, 10), 1400u);
}

TEST(PickStartStepTest, NoStepYet) {
  // m = -1: nobody has marked a step.
  EXPECT_EQ(PickStartStep(-1, 1, 2), 2u);
  EXPECT_EQ(PickStartStep(-1, 50, 2), 50u);
  EXPECT_EQ(PickStartStep(-1, 1, 0), 0u) << "m + margin < 0";
  EXPECT_EQ(PickStartStep(-1, 7, 1), 7u);
}

TEST(PickStartStepTest, LargeValuesDoNotOverflow) {
  const int64_t big = static_cast<int64_t>(kMaxPlausibleStep);
  EXPECT_EQ(PickStartStep(big, 1, 2), kMaxPlausibleStep + 3);
  const uint32_t k = std::numeric_limits<uint32_t>::max();
  const uint64_t target = PickStartStep(big, k, k);
  EXPECT_EQ(target % k, 0u);
  EXPECT_GT(target, kMaxPlausibleStep + k);
  const uint64_t top = PickStartStep(std::numeric_limits<int64_t>::max(), k, k);
  EXPECT_EQ(top % k, 0u);
  EXPECT_GT(top, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + k);
}

TEST(InterpretStepPageTest, ReadsAWellFormedPage) {
  StepReading r = InterpretStepPage(Page(101, 1704067200'000000000, 250'000'000));
  ASSERT_TRUE(r.has_step);
  EXPECT_EQ(r.current_step, 100u) << "the last marked step is next_step - 1";
  ASSERT_TRUE(r.last_step_time.has_value());
  EXPECT_EQ(*r.last_step_time, absl::FromUnixSeconds(1704067200));
  ASSERT_TRUE(r.period.has_value());
  EXPECT_EQ(*r.period, absl::Milliseconds(250));
}

TEST(InterpretStepPageTest, NoStepMarkedYet) {
  StepReading r = InterpretStepPage(Page(0));
  EXPECT_FALSE(r.has_step);
  EXPECT_FALSE(r.last_step_time.has_value());
  EXPECT_FALSE(r.period.has_value());
  EXPECT_TRUE(InterpretStepPage(Page(1)).has_step);
  EXPECT_EQ(InterpretStepPage(Page(1)).current_step, 0u);
}

TEST(InterpretStepPageTest, ForeignMagicOrVersionIsNoCounter) {
  StepPageFields f = Page(10, 5, 5);
  f.magic = 0x12345678;
  EXPECT_FALSE(InterpretStepPage(f).has_step);
  EXPECT_FALSE(InterpretStepPage(f).last_step_time.has_value());
  f = Page(10, 5, 5);
  f.version = steps::kStepPageVersion + 1;
  EXPECT_FALSE(InterpretStepPage(f).has_step);
  f.version = 0;
  EXPECT_FALSE(InterpretStepPage(f).has_step);
  EXPECT_FALSE(InterpretStepPage(StepPageFields{}).has_step) << "an all-zero page";
}

TEST(InterpretStepPageTest, AbsurdValuesAreUnknown) {
  EXPECT_FALSE(InterpretStepPage(Page(kMaxPlausibleStep + 2)).has_step);
  EXPECT_TRUE(InterpretStepPage(Page(kMaxPlausibleStep + 1)).has_step);
  EXPECT_FALSE(InterpretStepPage(Page(std::numeric_limits<uint64_t>::max())).has_step);

  EXPECT_FALSE(InterpretStepPage(Page(5, -1)).last_step_time.has_value());
  EXPECT_FALSE(InterpretStepPage(Page(5, 0)).last_step_time.has_value());

  EXPECT_FALSE(InterpretStepPage(Page(5, 1, -10)).period.has_value()) << "negative";
  EXPECT_FALSE(InterpretStepPage(Page(5, 1, 0)).period.has_value()) << "unknown";
  const int64_t day_ns = absl::ToInt64Nanoseconds(absl::Hours(24));
  EXPECT_TRUE(InterpretStepPage(Page(5, 1, day_ns)).period.has_value());
  EXPECT_FALSE(InterpretStepPage(Page(5, 1, day_ns + 1)).period.has_value()) << "over a day";
  EXPECT_FALSE(
      InterpretStepPage(Page(5, 1, std::numeric_limits<int64_t>::max())).period.has_value());
}

TEST(InterpretStepPageTest, AVersionTwoPageGivesItsRecentDurationsOldestFirst) {
  StepPageFields f = Page(10, 5, 5);
  f.durations_written = 3;
  f.durations[0] = 100;
  f.durations[1] = 200;
  f.durations[2] = 300;
  StepReading r = InterpretStepPage(f);
  EXPECT_EQ(r.durations_total, 3u);
  EXPECT_EQ(r.recent_durations,
            (std::vector<absl::Duration>{absl::Nanoseconds(100), absl::Nanoseconds(200),
                                         absl::Nanoseconds(300)}));
  // Wrapped: the newest kStepRingSize, from index written % size on.
  f.durations_written = steps::kStepRingSize + 1;
  for (uint32_t i = 0; i < steps::kStepRingSize; ++i) f.durations[i] = 1000 + i;
  f.durations[0] = 5;  // entry kStepRingSize, the newest
  r = InterpretStepPage(f);
  ASSERT_EQ(r.recent_durations.size(), steps::kStepRingSize);
  EXPECT_EQ(r.recent_durations.front(), absl::Nanoseconds(1001));
  EXPECT_EQ(r.recent_durations.back(), absl::Nanoseconds(5));
}

TEST(InterpretStepPageTest, ImplausibleDurationsAreLeftOut) {
  StepPageFields f = Page(10, 5, 5);
  f.durations_written = std::numeric_limits<uint64_t>::max();
  f.durations.fill(-1);
  f.durations[3] = 7;
  f.durations[4] = absl::ToInt64Nanoseconds(absl::Hours(25));
  StepReading r = InterpretStepPage(f);
  EXPECT_EQ(r.recent_durations, std::vector<absl::Duration>{absl::Nanoseconds(7)});
}

TEST(InterpretStepPageTest, AVersionOnePageOfAnOlderLibraryIsReadWithoutDurations) {
  StepPageFields f = Page(10, 5, 250);
  f.version = steps::kStepPageVersionWithoutRing;
  // Whatever follows a version 1 page's fields is not part of it.
  f.durations_written = 2;
  f.durations[0] = 100;
  StepReading r = InterpretStepPage(f);
  EXPECT_TRUE(r.has_step);
  EXPECT_EQ(r.current_step, 9u);
  EXPECT_EQ(r.period, absl::Nanoseconds(250));
  EXPECT_EQ(r.durations_total, 0u);
  EXPECT_TRUE(r.recent_durations.empty());
}

}  // namespace
}  // namespace gpuctl::daemon
