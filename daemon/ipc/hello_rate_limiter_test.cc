#include "daemon/ipc/hello_rate_limiter.h"

#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(HelloRateLimiterTest, AllowsABurstThenRefuses) {
  HelloRateLimiter limiter(/*per_second=*/10, /*burst=*/3);
  EXPECT_TRUE(limiter.TryAcquire(1000, kT0));
  EXPECT_TRUE(limiter.TryAcquire(1000, kT0));
  EXPECT_TRUE(limiter.TryAcquire(1000, kT0));
  EXPECT_FALSE(limiter.TryAcquire(1000, kT0));
}

TEST(HelloRateLimiterTest, RefillsAtTheRate) {
  HelloRateLimiter limiter(10, 2);
  EXPECT_TRUE(limiter.TryAcquire(1000, kT0));
  EXPECT_TRUE(limiter.TryAcquire(1000, kT0));
  EXPECT_FALSE(limiter.TryAcquire(1000, kT0 + absl::Milliseconds(50)));
  EXPECT_TRUE(limiter.TryAcquire(1000, kT0 + absl::Milliseconds(100)));
  EXPECT_FALSE(limiter.TryAcquire(1000, kT0 + absl::Milliseconds(100)));
  // Never above the burst, however long the pause.
  const absl::Time later = kT0 + absl::Hours(1);
  EXPECT_TRUE(limiter.TryAcquire(1000, later));
  EXPECT_TRUE(limiter.TryAcquire(1000, later));
  EXPECT_FALSE(limiter.TryAcquire(1000, later));
}

TEST(HelloRateLimiterTest, UidsHaveSeparateBuckets) {
  HelloRateLimiter limiter(1, 1);
  EXPECT_TRUE(limiter.TryAcquire(1000, kT0));
  EXPECT_FALSE(limiter.TryAcquire(1000, kT0));
  EXPECT_TRUE(limiter.TryAcquire(1001, kT0));
}

TEST(HelloRateLimiterTest, ZeroRateDisablesTheLimit) {
  HelloRateLimiter limiter(0, 0);
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(limiter.TryAcquire(1000, kT0));
  EXPECT_EQ(limiter.tracked_uids(), 0u);
}

TEST(HelloRateLimiterTest, ClockGoingBackwardsGivesNoTokens) {
  HelloRateLimiter limiter(10, 1);
  EXPECT_TRUE(limiter.TryAcquire(1000, kT0));
  EXPECT_FALSE(limiter.TryAcquire(1000, kT0 - absl::Seconds(10)));
}

TEST(HelloRateLimiterTest, ForgetsIdleUids) {
  HelloRateLimiter limiter(10, 5);
  for (uint32_t uid = 0; uid < 100; ++uid) limiter.TryAcquire(uid, kT0);
  EXPECT_EQ(limiter.tracked_uids(), 100u);
  limiter.TryAcquire(7, kT0 + absl::Minutes(2));
  EXPECT_EQ(limiter.tracked_uids(), 1u);
}

}  // namespace
}  // namespace gpuctl::daemon
