#ifndef GPUCTL_DAEMON_COMMON_TESTING_FAKE_TASK_RUNNER_H_
#define GPUCTL_DAEMON_COMMON_TESTING_FAKE_TASK_RUNNER_H_

#include <cstddef>
#include <deque>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "daemon/common/mutex.h"
#include "daemon/common/task_runner.h"
#include "daemon/common/testing/fake_clock.h"

namespace gpuctl::testing {

// A TaskRunner whose tasks run only inside RunUntilIdle() / AdvanceBy(), on
// the calling thread; timers fire against a FakeClock. Post() is
// thread-safe, as the contract requires.
class FakeTaskRunner final : public TaskRunner {
 public:
  explicit FakeTaskRunner(FakeClock* clock) : clock_(clock) {}

  void Post(Task task) override;
  TimerId PostDelayed(absl::Duration delay, Task task) override;
  void Cancel(TimerId id) override;

  // Runs posted tasks and timers due at the current time until none is left.
  // Returns the number of tasks run.
  size_t RunUntilIdle();
  // Moves the clock forward by `d`, stopping at each timer's due time to run
  // it (and whatever it posts) in order.
  void AdvanceBy(absl::Duration d);

  size_t pending_tasks();
  size_t pending_timers();

 private:
  struct TimerKey {
    absl::Time due;
    TimerId id;
    bool operator<(const TimerKey& o) const { return due != o.due ? due < o.due : id < o.id; }
  };
  bool RunOne();

  FakeClock* clock_;
  Mutex mu_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  std::map<TimerKey, Task> timers_ ABSL_GUARDED_BY(mu_);
  std::map<TimerId, absl::Time> timer_due_ ABSL_GUARDED_BY(mu_);
  TimerId next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

// Runs each task at once on the calling thread.
class InlineExecutor final : public Executor {
 public:
  void Run(Task task) override { std::move(task)(); }
};

// Queues tasks until the test runs them. Thread-safe.
class ManualExecutor final : public Executor {
 public:
  void Run(Task task) override {
    MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
  }
  // Runs queued tasks (and tasks they queue) until none is left.
  size_t RunAll() {
    size_t count = 0;
    while (RunOne()) ++count;
    return count;
  }
  bool RunOne() {
    Task task;
    {
      MutexLock lock(&mu_);
      if (tasks_.empty()) return false;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    std::move(task)();
    return true;
  }
  size_t pending() {
    MutexLock lock(&mu_);
    return tasks_.size();
  }

 private:
  Mutex mu_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuctl::testing

#endif  // GPUCTL_DAEMON_COMMON_TESTING_FAKE_TASK_RUNNER_H_
