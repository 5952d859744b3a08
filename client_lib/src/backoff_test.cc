#include "client_lib/src/backoff.h"

#include <gtest/gtest.h>

namespace gpuctl::client {
namespace {

TEST(BackoffTest, DoublesWithJitterUpToTheMaximumAndResets) {
  Backoff backoff(100, 30'000, 42);
  int64_t base = 100;
  for (int i = 0; i < 20; ++i) {
    const int64_t d = backoff.NextDelayMs();
    EXPECT_GE(d, base / 2) << i;
    EXPECT_LE(d, base) << i;
    base = std::min<int64_t>(base * 2, 30'000);
  }
  backoff.Reset();
  EXPECT_LE(backoff.NextDelayMs(), 100);
}

TEST(BackoffTest, JitterSpreadsProcesses) {
  Backoff a(1000, 1000, 1);
  Backoff b(1000, 1000, 2);
  int differ = 0;
  for (int i = 0; i < 10; ++i) differ += a.NextDelayMs() != b.NextDelayMs();
  EXPECT_GT(differ, 5);
}

}  // namespace
}  // namespace gpuctl::client
