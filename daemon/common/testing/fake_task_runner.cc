#include "daemon/common/testing/fake_task_runner.h"

namespace gpuctl::testing {

void FakeTaskRunner::Post(Task task) {
  MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

TaskRunner::TimerId FakeTaskRunner::PostDelayed(absl::Duration delay, Task task) {
  absl::Time due = clock_->Now() + delay;
  MutexLock lock(&mu_);
  TimerId id = next_id_++;
  timers_.emplace(TimerKey{due, id}, std::move(task));
  timer_due_.emplace(id, due);
  return id;
}

void FakeTaskRunner::Cancel(TimerId id) {
  MutexLock lock(&mu_);
  auto it = timer_due_.find(id);
  if (it == timer_due_.end()) return;
  timers_.erase(TimerKey{it->second, id});
  timer_due_.erase(it);
}

bool FakeTaskRunner::RunOne() {
  Task task;
  {
    absl::Time now = clock_->Now();
    MutexLock lock(&mu_);
    if (!tasks_.empty()) {
      task = std::move(tasks_.front());
      tasks_.pop_front();
    } else if (!timers_.empty() && timers_.begin()->first.due <= now) {
      auto it = timers_.begin();
      timer_due_.erase(it->first.id);
      task = std::move(it->second);
      timers_.erase(it);
    } else {
      return false;
    }
  }
  std::move(task)();
  return true;
}

size_t FakeTaskRunner::RunUntilIdle() {
  size_t count = 0;
  while (RunOne()) ++count;
  return count;
}

void FakeTaskRunner::AdvanceBy(absl::Duration d) {
  absl::Time end = clock_->Now() + d;
  RunUntilIdle();
  while (true) {
    absl::Time next;
    {
      MutexLock lock(&mu_);
      if (timers_.empty() || timers_.begin()->first.due > end) break;
      next = timers_.begin()->first.due;
    }
    if (next > clock_->Now()) clock_->Set(next);
    RunUntilIdle();
  }
  if (end > clock_->Now()) clock_->Set(end);
  RunUntilIdle();
}

size_t FakeTaskRunner::pending_tasks() {
  MutexLock lock(&mu_);
  return tasks_.size();
}

size_t FakeTaskRunner::pending_timers() {
  MutexLock lock(&mu_);
  return timers_.size();
}

}  // namespace gpuctl::testing
