#ifndef GPUCTL_DAEMON_COMMON_DEADLINE_WAIT_H_
#define GPUCTL_DAEMON_COMMON_DEADLINE_WAIT_H_

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/common/clock.h"
#include "daemon/common/mutex.h"
#include "daemon/common/task_runner.h"

namespace gpuctl {

// Lets a thread of its own (one that blocks on I/O, so it cannot be an
// event loop) wait on a condition variable until a deadline read on an
// injected Clock, so that a test moving a FakeClock decides when the
// deadline passes.
//
// Without `timers`, Wait is a timed wait of (deadline - clock.Now()) of
// real time. With `timers`, a timer armed there signals the condition
// variable at the deadline; Wait itself then has no timeout. Post() is
// called from the waiting thread, PostDelayed() from inside a posted task,
// as TaskRunner's contract asks.
//
// Used under the owner's mutex, which the timers also take to signal:
// destroy the waiter without holding it. Timers still pending at
// destruction do nothing when they fire.
class DeadlineWaiter {
 public:
  // `clock` must outlive the waiter; `timers`, when set, must outlive
  // every timer armed on it.
  DeadlineWaiter(Clock* clock, TaskRunner* timers, absl::Mutex* mu, absl::CondVar* cv);
  ~DeadlineWaiter();
  DeadlineWaiter(const DeadlineWaiter&) = delete;
  DeadlineWaiter& operator=(const DeadlineWaiter&) = delete;

  Clock& clock() const { return *clock_; }

  // With the owner's mutex held. Returns on a signal, at the deadline, or
  // spuriously: the caller re-checks its condition and the clock.
  void Wait(absl::Time deadline);

 private:
  // What a timer reaches; outlives the waiter while a timer holds it. Lock
  // order: mu, then the owner's mutex. gpuctl::Mutex: ThreadSanitizer
  // sees pthread locks only (docs/testing.md).
  struct Target {
    Mutex mu;
    bool alive ABSL_GUARDED_BY(mu) = true;
    absl::Mutex* owner_mu = nullptr;
    absl::CondVar* owner_cv = nullptr;
    // Under *owner_mu: the earliest deadline a pending timer stands for;
    // InfiniteFuture: none.
    absl::Time armed = absl::InfiniteFuture();
  };
  void Arm(absl::Time deadline);

  Clock* const clock_;
  TaskRunner* const timers_;
  absl::Mutex* const mu_;
  absl::CondVar* const cv_;
  const std::shared_ptr<Target> target_;
};

}  // namespace gpuctl

#endif  // GPUCTL_DAEMON_COMMON_DEADLINE_WAIT_H_
