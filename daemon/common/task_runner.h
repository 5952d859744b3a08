#ifndef GPUCTL_DAEMON_COMMON_TASK_RUNNER_H_
#define GPUCTL_DAEMON_COMMON_TASK_RUNNER_H_

#include <cstdint>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"

namespace gpuctl {

// A sequence of tasks run one at a time on one thread (the component's event
// loop). Post() may be called from any thread; PostDelayed() and Cancel()
// only from the runner's own thread.
class TaskRunner {
 public:
  using Task = absl::AnyInvocable<void() &&>;
  using TimerId = uint64_t;

  virtual ~TaskRunner() = default;
  virtual void Post(Task task) = 0;
  // Runs `task` after `delay` unless cancelled first. Never returns 0.
  virtual TimerId PostDelayed(absl::Duration delay, Task task) = 0;
  // Cancelling a timer that already ran or was cancelled is a no-op.
  virtual void Cancel(TimerId id) = 0;
};

// Runs blocking work (conversion, compression, storage) off the event loop.
// Thread-safe. Tasks may run concurrently with each other.
class Executor {
 public:
  using Task = absl::AnyInvocable<void() &&>;
  virtual ~Executor() = default;
  virtual void Run(Task task) = 0;
};

}  // namespace gpuctl

#endif  // GPUCTL_DAEMON_COMMON_TASK_RUNNER_H_
