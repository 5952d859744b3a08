#ifndef GPUCTL_DAEMON_COMMON_TESTING_FAKE_CLOCK_H_
#define GPUCTL_DAEMON_COMMON_TESTING_FAKE_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "daemon/common/clock.h"
#include "daemon/common/mutex.h"

namespace gpuctl::testing {

// A Clock that moves only when told. Thread-safe.
class FakeClock final : public Clock {
 public:
  // 2024-01-01T00:00:00Z: a fixed, realistic wall-clock instant.
  static absl::Time DefaultStart() { return absl::FromUnixSeconds(1704067200); }

  explicit FakeClock(absl::Time start = DefaultStart()) : now_(start) {}

  absl::Time Now() override {
    MutexLock lock(&mu_);
    return now_;
  }
  void Set(absl::Time t) {
    MutexLock lock(&mu_);
    now_ = t;
  }
  void Advance(absl::Duration d) {
    MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuctl::testing

#endif  // GPUCTL_DAEMON_COMMON_TESTING_FAKE_CLOCK_H_
