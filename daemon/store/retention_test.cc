#include "daemon/store/retention.h"

#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'700'000'000);

TEST(RetentionTest, ZeroMeansUnlimited) {
  RetentionPolicy policy;
  EXPECT_TRUE(IsUnlimited(policy));
  EXPECT_EQ(DescribeRetention(policy), "unlimited");
  RetentionPlanner planner(policy, kNow, 1'000'000, uint64_t{1} << 50);
  EXPECT_EQ(planner.Over(kNow - absl::Hours(24 * 3650)), std::nullopt);
  for (RetentionPolicy one :
       {RetentionPolicy{1, absl::ZeroDuration(), 0}, RetentionPolicy{0, absl::Seconds(1), 0},
        RetentionPolicy{0, absl::ZeroDuration(), 1}}) {
    EXPECT_FALSE(IsUnlimited(one));
  }
}

TEST(RetentionTest, DescribesEachLimit) {
  RetentionPolicy policy{uint64_t{50} << 30, absl::Hours(24 * 30), 100000};
  EXPECT_EQ(DescribeRetention(policy), "max_bytes=53687091200 max_age=720h max_count=100000");
  EXPECT_EQ(EvictionReasonName(EvictionReason::kMaxAge), "max_age");
  EXPECT_EQ(EvictionReasonName(EvictionReason::kMaxCount), "max_count");
  EXPECT_EQ(EvictionReasonName(EvictionReason::kMaxBytes), "max_bytes");
}

TEST(RetentionTest, AgeEvictsOnlyTracesOlderThanTheLimit) {
  RetentionPlanner planner({0, absl::Hours(1), 0}, kNow, 3, 300);
  EXPECT_EQ(planner.Over(kNow - absl::Hours(2)), EvictionReason::kMaxAge);
  EXPECT_EQ(planner.Over(kNow - absl::Hours(1) - absl::Milliseconds(1)), EvictionReason::kMaxAge);
  EXPECT_EQ(planner.Over(kNow - absl::Hours(1)), std::nullopt);  // exactly the limit: kept
  EXPECT_EQ(planner.Over(kNow), std::nullopt);
  EXPECT_EQ(planner.Over(kNow + absl::Hours(1)), std::nullopt);  // clock stepped back
}

TEST(RetentionTest, CountEvictsUntilAtTheLimit) {
  RetentionPlanner planner({0, absl::ZeroDuration(), 2}, kNow, 4, 400);
  EXPECT_EQ(planner.Over(kNow), EvictionReason::kMaxCount);
  planner.Evicted(100);
  EXPECT_EQ(planner.Over(kNow), EvictionReason::kMaxCount);
  planner.Evicted(100);
  EXPECT_EQ(planner.Over(kNow), std::nullopt);
  EXPECT_EQ(planner.count(), 2u);
  EXPECT_EQ(planner.bytes(), 200u);
}

TEST(RetentionTest, BytesEvictUntilAtOrBelowTheLimit) {
  RetentionPlanner planner({1000, absl::ZeroDuration(), 0}, kNow, 3, 1500);
  EXPECT_EQ(planner.Over(kNow), EvictionReason::kMaxBytes);
  planner.Evicted(499);
  EXPECT_EQ(planner.Over(kNow), EvictionReason::kMaxBytes);
  planner.Evicted(1);
  EXPECT_EQ(planner.Over(kNow), std::nullopt);
  // Totals never go below zero whatever the store reports.
  planner.Evicted(5000);
  planner.Evicted(1);
  planner.Evicted(1);
  EXPECT_EQ(planner.bytes(), 0u);
  EXPECT_EQ(planner.count(), 0u);
}

TEST(RetentionTest, AgeIsReportedBeforeCountAndCountBeforeBytes) {
  RetentionPlanner planner({10, absl::Hours(1), 1}, kNow, 5, 100);
  EXPECT_EQ(planner.Over(kNow - absl::Hours(3)), EvictionReason::kMaxAge);
  EXPECT_EQ(planner.Over(kNow), EvictionReason::kMaxCount);
  for (int i = 0; i < 4; ++i) planner.Evicted(1);
  EXPECT_EQ(planner.Over(kNow), EvictionReason::kMaxBytes);
}

}  // namespace
}  // namespace gpuctl::daemon
