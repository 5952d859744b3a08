// Reconnect delays: exponential with full jitter in [d/2, d], so a daemon
// restart is not met by every process on the host at the same instant.
#ifndef GPUCTL_CLIENT_LIB_SRC_BACKOFF_H_
#define GPUCTL_CLIENT_LIB_SRC_BACKOFF_H_

#include <cstdint>

namespace gpuctl::client {

class Backoff {
 public:
  Backoff(int64_t initial_ms, int64_t max_ms, uint64_t seed);

  // Returns the next delay and doubles the base (up to max_ms).
  int64_t NextDelayMs();
  void Reset() { current_ms_ = initial_ms_; }

 private:
  uint64_t NextRandom();

  const int64_t initial_ms_;
  const int64_t max_ms_;
  int64_t current_ms_;
  uint64_t state_;
};

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_BACKOFF_H_
