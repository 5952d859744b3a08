#ifndef GPUCTL_DAEMON_COMMON_TESTING_NOTIFICATION_H_
#define GPUCTL_DAEMON_COMMON_TESTING_NOTIFICATION_H_

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

namespace gpuctl::testing {

// A one-shot event for tests, with absl::Notification's interface, built on
// std::mutex so that ThreadSanitizer sees Notify() happen before a returning
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
    std::lock_guard<std::mutex> lock(mu_);
    notified_ = true;
    cv_.notify_all();
  }
  bool HasBeenNotified() const {
    std::lock_guard<std::mutex> lock(mu_);
    return notified_;
  }
  void WaitForNotification() const {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return notified_; });
  }
  // False when `timeout` passed first.
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    // Bounded so that steady_clock::now() + timeout cannot overflow.
    timeout = std::min(timeout, absl::Hours(24 * 365));
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [this] { return notified_; });
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gpuctl::testing

#endif  // GPUCTL_DAEMON_COMMON_TESTING_NOTIFICATION_H_
