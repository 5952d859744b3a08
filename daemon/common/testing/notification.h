#ifndef GPUCTL_DAEMON_COMMON_TESTING_NOTIFICATION_H_
#define GPUCTL_DAEMON_COMMON_TESTING_NOTIFICATION_H_

#include <algorithm>
#include <chrono>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "daemon/common/mutex.h"

namespace gpuctl::testing {

// A one-shot event for tests, with absl::Notification's interface, built on
// gpuctl::Mutex so that ThreadSanitizer sees Notify() happen before a returning
// wait (absl::Notification locks inside an uninstrumented libabsl; see
// docs/testing.md). Everything the notifying thread did before Notify() is
// visible to the thread whose wait returned true. Thread-safe.
class Notification {
 public:
  Notification() = default;
  Notification(const Notification&) = delete;
  Notification& operator=(const Notification&) = delete;

  // At most once. Signals while holding the lock: a waiter whose wait
  // returns may destroy this object at once, so Notify() must not touch it
  // after unlocking.
  void Notify() {
    MutexLock lock(&mu_);
    notified_ = true;
    cv_.SignalAll();
  }
  bool HasBeenNotified() const {
    MutexLock lock(&mu_);
    return notified_;
  }
  void WaitForNotification() const {
    MutexLock lock(&mu_);
    while (!notified_) cv_.Wait(&mu_);
  }
  // False when `timeout` passed first.
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    // Bounded so that steady_clock::now() + timeout cannot overflow.
    timeout = std::min(timeout, absl::Hours(24 * 365));
    const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
    MutexLock lock(&mu_);
    while (!notified_) {
      if (!cv_.WaitUntil(&mu_, deadline)) return notified_;
    }
    return true;
  }

 private:
  mutable Mutex mu_;
  mutable CondVar cv_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gpuctl::testing

#endif  // GPUCTL_DAEMON_COMMON_TESTING_NOTIFICATION_H_
