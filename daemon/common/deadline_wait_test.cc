#include "daemon/common/deadline_wait.h"

#include <atomic>
#include <memory>
#include <thread>

#include "daemon/common/testing/fake_clock.h"
#include "daemon/common/testing/observed_task_runner.h"
#include "gtest/gtest.h"

namespace gpuctl {
namespace {

using testing::FakeClock;
using testing::ObservedTaskRunner;

// A thread that waits until `deadline` on the waiter's clock, or until told
// to stop.
class Sleeper {
 public:
  Sleeper(Clock* clock, TaskRunner* timers, absl::Time deadline)
      : waiter_(std::make_unique<DeadlineWaiter>(clock, timers, &mu_, &cv_)) {
    thread_ = std::thread([this, deadline] {
      absl::MutexLock lock(&mu_);
      while (!stop_ && waiter_->clock().Now() < deadline) waiter_->Wait(deadline);
      done_ = true;
    });
  }
  ~Sleeper() { Stop(); }
  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
      cv_.SignalAll();
    }
    if (thread_.joinable()) thread_.join();
  }
  void Join() { thread_.join(); }
  bool done() const { return done_; }
  void DestroyWaiter() { waiter_.reset(); }

 private:
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::unique_ptr<DeadlineWaiter> waiter_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

TEST(DeadlineWaiterTest, WithTimersTheWaitEndsWhenTheFakeClockPassesTheDeadline) {
  FakeClock clock;
  ObservedTaskRunner timers(&clock);
  const absl::Time deadline = clock.Now() + absl::Seconds(30);
  Sleeper sleeper(&clock, &timers, deadline);
  ASSERT_TRUE(timers.RunUntilTimerArmedAt(deadline));
  timers.fake().AdvanceBy(absl::Seconds(30) - absl::Milliseconds(1));
  EXPECT_FALSE(sleeper.done());
  timers.fake().AdvanceBy(absl::Milliseconds(1));
  sleeper.Join();
  EXPECT_TRUE(sleeper.done());
  EXPECT_EQ(timers.timers_armed_at(deadline), 1u);
}

TEST(DeadlineWaiterTest, ATimerThatOutlivesItsWaiterDoesNothing) {
  FakeClock clock;
  ObservedTaskRunner timers(&clock);
  const absl::Time deadline = clock.Now() + absl::Seconds(5);
  Sleeper sleeper(&clock, &timers, deadline);
  ASSERT_TRUE(timers.RunUntilTimerArmedAt(deadline));
  sleeper.Stop();
  sleeper.DestroyWaiter();
  timers.fake().AdvanceBy(absl::Seconds(5));
  EXPECT_EQ(timers.fake().pending_timers(), 0u);
}

TEST(DeadlineWaiterTest, WithoutTimersTheWaitIsTimedOnTheClock) {
  RealClock clock;
  Sleeper sleeper(&clock, nullptr, clock.Now() + absl::Milliseconds(5));
  sleeper.Join();
  EXPECT_TRUE(sleeper.done());
}

}  // namespace
}  // namespace gpuctl
