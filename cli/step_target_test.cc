#include "cli/step_target.h"

#include <limits>

#include "gtest/gtest.h"

namespace gpuctl::cli {
namespace {

TEST(CliTargetStartStepTest, NextMultipleAboveLargestPlusMargin) {
  EXPECT_EQ(*TargetStartStep(1187, 100, 12), 1200u);  // 1199 -> 1200
  EXPECT_EQ(*TargetStartStep(1188, 100, 12), 1300u);  // 1200 is not above 1200
  EXPECT_EQ(*TargetStartStep(10, 1, 2), 13u);
  EXPECT_EQ(*TargetStartStep(0, 1, 0), 1u);
  EXPECT_EQ(*TargetStartStep(7, 8, 0), 8u);
  EXPECT_EQ(*TargetStartStep(8, 8, 0), 16u);
}

TEST(CliTargetStartStepTest, NoStepYet) {
  // m = -1: -1 + 2 = 1 -> 2; with no margin, -1 < 0 -> 0.
  EXPECT_EQ(*TargetStartStep(std::nullopt, 1, 2), 2u);
  EXPECT_EQ(*TargetStartStep(std::nullopt, 1, 0), 0u);
  EXPECT_EQ(*TargetStartStep(std::nullopt, 1, 1), 1u);
  EXPECT_EQ(*TargetStartStep(std::nullopt, 100, 2), 100u);
}

TEST(CliTargetStartStepTest, RefusesZeroRoundupAndOverflow) {
  EXPECT_EQ(TargetStartStep(5, 0, 2).status().code(), absl::StatusCode::kInvalidArgument);
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(TargetStartStep(kMax - 1, 1, 0).value(), kMax);
  EXPECT_EQ(TargetStartStep(kMax, 1, 0).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(TargetStartStep(kMax - 10, 1, 100).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(*TargetStartStep(kMax - 10, kMax, 2), kMax);
  EXPECT_EQ(TargetStartStep(kMax - 1, kMax / 2 + 1, 0).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST(CliAutoStepMarginTest, CoversTheFanOut) {
  // 500 ms at 40 ms a step: ceil(12.5) + 1 = 14.
  EXPECT_EQ(AutoStepMargin(absl::Milliseconds(500), absl::Milliseconds(40)), 14u);
  // Exact division: 500 / 100 = 5, + 1.
  EXPECT_EQ(AutoStepMargin(absl::Milliseconds(500), absl::Milliseconds(100)), 6u);
  // Slow steps: never below 2.
  EXPECT_EQ(AutoStepMargin(absl::Milliseconds(500), absl::Seconds(10)), 2u);
  EXPECT_EQ(AutoStepMargin(absl::Milliseconds(500), std::nullopt), 2u);
  EXPECT_EQ(AutoStepMargin(absl::Milliseconds(500), absl::ZeroDuration()), 2u);
  // A nanosecond period against an hour does not overflow.
  EXPECT_EQ(AutoStepMargin(absl::Hours(1), absl::Nanoseconds(1)), 3600000000001u);
}

}  // namespace
}  // namespace gpuctl::cli
