#ifndef GPUCTL_DAEMON_IPC_HELLO_RATE_LIMITER_H_
#define GPUCTL_DAEMON_IPC_HELLO_RATE_LIMITER_H_

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"

namespace gpuctl::daemon {

// Registration churn control: a token bucket per uid. Each Hello takes a
// token; a uid holds at most `burst` and gains `per_second` a second, so a
// restart of a whole node's ranks passes while a process reconnecting in a
// loop is refused. Time comes from the caller (monotonic). Not thread-safe.
class HelloRateLimiter {
 public:
  // per_second == 0 disables the limit.
  HelloRateLimiter(double per_second, double burst) : per_second_(per_second), burst_(burst) {}

  // Takes a token for `uid` at `now`; false when it has none left.
  bool TryAcquire(uint32_t uid, absl::Time now);

  double per_second() const { return per_second_; }
  double burst() const { return burst_; }
  size_t tracked_uids() const { return buckets_.size(); }

 private:
  struct Bucket {
    double tokens;
    absl::Time updated;
  };
  // Buckets full again are forgotten, so the map stays as small as the set
  // of uids registering right now.
  void ForgetFullBuckets(absl::Time now);

  const double per_second_;
  const double burst_;
  absl::flat_hash_map<uint32_t, Bucket> buckets_;
  absl::Time last_sweep_ = absl::InfinitePast();
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_IPC_HELLO_RATE_LIMITER_H_
