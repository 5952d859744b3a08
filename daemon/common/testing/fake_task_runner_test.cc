#include "daemon/common/testing/fake_task_runner.h"

#include <string>

#include "gtest/gtest.h"

namespace gpuctl::testing {
namespace {

TEST(FakeTaskRunnerTest, RunsPostedTasksInOrder) {
  FakeClock clock;
  FakeTaskRunner runner(&clock);
  std::string order;
  runner.Post([&] {
    order += "a";
    runner.Post([&] { order += "c"; });
  });
  runner.Post([&] { order += "b"; });
  EXPECT_EQ(order, "");
  EXPECT_EQ(runner.RunUntilIdle(), 3u);
  EXPECT_EQ(order, "abc");
}

TEST(FakeTaskRunnerTest, TimersFireWhenDueInOrder) {
  FakeClock clock;
  absl::Time start = clock.Now();
  FakeTaskRunner runner(&clock);
  std::string order;
  absl::Time fired_b;
  runner.PostDelayed(absl::Seconds(2), [&] {
    order += "b";
    fired_b = clock.Now();
  });
  runner.PostDelayed(absl::Seconds(1), [&] {
    order += "a";
    runner.PostDelayed(absl::Milliseconds(500), [&] { order += "x"; });
  });
  auto cancelled = runner.PostDelayed(absl::Seconds(1), [&] { order += "never"; });
  runner.Cancel(cancelled);
  runner.Cancel(cancelled);
  runner.RunUntilIdle();
  EXPECT_EQ(order, "");
  runner.AdvanceBy(absl::Milliseconds(1999));
  EXPECT_EQ(order, "ax");
  runner.AdvanceBy(absl::Milliseconds(1));
  EXPECT_EQ(order, "axb");
  EXPECT_EQ(fired_b, start + absl::Seconds(2));
  EXPECT_EQ(clock.Now(), start + absl::Seconds(2));
  EXPECT_EQ(runner.pending_timers(), 0u);
}

TEST(ManualExecutorTest, QueuesUntilRun) {
  ManualExecutor executor;
  int n = 0;
  executor.Run([&] {
    ++n;
    executor.Run([&] { ++n; });
  });
  EXPECT_EQ(n, 0);
  EXPECT_EQ(executor.RunAll(), 2u);
  EXPECT_EQ(n, 2);
}

}  // namespace
}  // namespace gpuctl::testing
