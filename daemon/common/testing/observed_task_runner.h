#ifndef GPUCTL_DAEMON_COMMON_TESTING_OBSERVED_TASK_RUNNER_H_
#define GPUCTL_DAEMON_COMMON_TESTING_OBSERVED_TASK_RUNNER_H_

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "daemon/common/mutex.h"
#include "daemon/common/task_runner.h"
#include "daemon/common/testing/fake_clock.h"
#include "daemon/common/testing/fake_task_runner.h"

namespace gpuctl::testing {

// A FakeTaskRunner for code that posts to it from threads of its own (a
// DeadlineWaiter, deadline_wait.h): the test waits, with a deadline, for
// those posts and for the timers they arm, then moves the clock.
class ObservedTaskRunner final : public TaskRunner {
 public:
  explicit ObservedTaskRunner(FakeClock* clock) : clock_(clock), fake_(clock) {}

  void Post(Task task) override {
    fake_.Post(std::move(task));
    MutexLock lock(&mu_);
    ++posts_;
    posted_.SignalAll();
  }
  TimerId PostDelayed(absl::Duration delay, Task task) override {
    {
      MutexLock lock(&mu_);
      timer_dues_.push_back(clock_->Now() + delay);
    }
    return fake_.PostDelayed(delay, std::move(task));
  }
  void Cancel(TimerId id) override { fake_.Cancel(id); }

  // Runs what was posted until a timer due at `due` has been armed; false
  // when none was within `timeout`.
  bool RunUntilTimerArmedAt(absl::Time due, absl::Duration timeout = absl::Seconds(20)) {
    const auto until = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
    while (true) {
      size_t seen;
      {
        MutexLock lock(&mu_);
        seen = posts_;
      }
      fake_.RunUntilIdle();
      MutexLock lock(&mu_);
      if (std::find(timer_dues_.begin(), timer_dues_.end(), due) != timer_dues_.end()) return true;
      while (posts_ <= seen) {
        if (!posted_.WaitUntil(&mu_, until) && posts_ <= seen) return false;
      }
    }
  }
  // Timers armed so far, fired or not, by due time.
  size_t timers_armed_at(absl::Time due) {
    MutexLock lock(&mu_);
    return std::count(timer_dues_.begin(), timer_dues_.end(), due);
  }

  FakeTaskRunner& fake() { return fake_; }

 private:
  FakeClock* const clock_;
  FakeTaskRunner fake_;
  Mutex mu_;
  CondVar posted_;
  size_t posts_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<absl::Time> timer_dues_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuctl::testing

#endif  // GPUCTL_DAEMON_COMMON_TESTING_OBSERVED_TASK_RUNNER_H_
