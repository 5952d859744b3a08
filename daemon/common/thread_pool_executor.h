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

// How a pool's threads are scheduled. Lowering a thread's priority needs no
// privilege. Linux's fair scheduler still gives a nice 19 or SCHED_IDLE
// thread a small share of a CPU that others keep busy: its work is slowed,
// never starved.
struct ThreadPriority {
  // 0 (as created) to 19 (lowest): the threads' nice level.
  int nice = 0;
  // SCHED_IDLE: the threads run when nothing else wants the CPU; `nice` is
  // then ignored.
  bool idle = false;
};

// An Executor backed by `num_threads` worker threads sharing one FIFO queue.
// Shutdown() (also run by the destructor) stops the threads once every
// queued task has run, including tasks queued by those tasks; a Run() after
// Shutdown() returned drops the task.
class ThreadPoolExecutor final : public Executor {
 public:
  // Each thread applies `priority` to itself first (a failure is logged
  // and the thread runs as created).
  explicit ThreadPoolExecutor(int num_threads, ThreadPriority priority = {});
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
