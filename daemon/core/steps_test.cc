#include "daemon/core/steps.h"

#include <cstdint>
#include <limits>

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

}  // namespace
}  // namespace gpuctl::daemon
