#ifndef GPUCTL_DAEMON_COMMON_THREAD_POOL_EXECUTOR_H_
#define GPUCTL_DAEMON_COMMON_THREAD_POOL_EXECUTOR_H_

#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "daemon/common/mutex.h"
#include "daemon/common/task_runner.h"

namespace gpuctl {

// An Executor backed by `num_threads` worker threads sharing one FIFO queue.
// Shutdown() (also run by the destructor) stops the threads once every
// queued task has run, including tasks queued by those tasks; a Run() after
// Shutdown() returned drops the task.
class ThreadPoolExecutor final : public Executor {
 public:
  explicit ThreadPoolExecutor(int num_threads);
  ~ThreadPoolExecutor() override;
  ThreadPoolExecutor(const ThreadPoolExecutor&) = delete;
  ThreadPoolExecutor& operator=(const ThreadPoolExecutor&) = delete;

  void Run(Task task) override;
  // Drains the queue and joins the threads. Idempotent. Must not be called
  // from a worker thread.
  void Shutdown();

 private:
  void WorkerLoop();
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // gpuctl::Mutex rather than absl::Mutex: ThreadSanitizer sees pthread
  // locks, not the ones inside an uninstrumented libabsl (docs/testing.md).
  Mutex mu_;
  // Signalled when queue_ gains a task or stopping_ is set.
  CondVar work_cv_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace gpuctl

#endif  // GPUCTL_DAEMON_COMMON_THREAD_POOL_EXECUTOR_H_
