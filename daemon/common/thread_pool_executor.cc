#include "daemon/common/thread_pool_executor.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "daemon/common/log.h"

namespace gpuctl {

namespace {

// On the calling thread only: Linux keeps nice and policy per thread.
void ApplyPriority(const ThreadPriority& priority) {
  if (priority.idle) {
    sched_param param{};
    if (int err = pthread_setschedparam(pthread_self(), SCHED_IDLE, &param); err != 0) {
      LogWarning("worker thread stays at its priority: SCHED_IDLE refused",
                 {{"error", std::strerror(err)}});
    }
    return;
  }
  if (priority.nice <= 0) return;
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), priority.nice) != 0) {
    LogWarning("worker thread stays at its priority: nice refused",
               {{"nice", priority.nice}, {"error", std::strerror(errno)}});
  }
}

}  // namespace

ThreadPoolExecutor::ThreadPoolExecutor(int num_threads, ThreadPriority priority) {
  if (num_threads < 1) num_threads = 1;
  threads_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) {
    threads_.emplace_back([this, priority] {
      ApplyPriority(priority);
      WorkerLoop();
    });
  }
}

ThreadPoolExecutor::~ThreadPoolExecutor() { Shutdown(); }

void ThreadPoolExecutor::Run(Task task) {
  {
    MutexLock lock(&mu_);
    if (stopped_) {
      LogWarning("executor task dropped after shutdown");
      return;
    }
    queue_.push_back(std::move(task));
  }
  work_cv_.Signal();
}

void ThreadPoolExecutor::Shutdown() {
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  work_cv_.SignalAll();
  for (std::thread& thread : threads_) thread.join();
  MutexLock lock(&mu_);
  stopped_ = true;
  // Tasks queued after the last worker left (possible only from other
  // threads racing Shutdown) are dropped with the queue.
  if (!queue_.empty()) LogWarning("executor tasks dropped at shutdown", {{"count", queue_.size()}});
  queue_.clear();
}

bool ThreadPoolExecutor::HasWorkOrStopping() const { return !queue_.empty() || stopping_; }

void ThreadPoolExecutor::WorkerLoop() {
  while (true) {
    Task task;
    {
      MutexLock lock(&mu_);
      while (!HasWorkOrStopping()) work_cv_.Wait(&mu_);
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(task)();
  }
}

}  // namespace gpuctl
