// Test-only Clock for tests that run on real time but need to see, or
// move ahead, the monotonic time a component reads for its timeouts.
#ifndef GPUCTL_CLIENT_LIB_SRC_STEERABLE_CLOCK_FOR_TEST_H_
#define GPUCTL_CLIENT_LIB_SRC_STEERABLE_CLOCK_FOR_TEST_H_

#include <atomic>
#include <cstdint>

#include "client_lib/src/clock.h"

namespace gpuctl::client::testing {

// The real clock, but for the monotonic reads (the timeouts): the test
// counts them, and can have each one move the clock ahead. Thread-safe.
class SteerableClock final : public Clock {
 public:
  int64_t RealtimeNs() override { return ReadClockNs(CLOCK_REALTIME); }
  int64_t MonotonicNs() override {
    reads_.fetch_add(1, std::memory_order_relaxed);
    const int64_t leap = leap_ns_.load(std::memory_order_relaxed);
    return ReadClockNs(CLOCK_MONOTONIC) + offset_ns_.fetch_add(leap) + leap;
  }
  // From now on every monotonic read is `leap_ms` later than real time has
  // made it; 0 stops that.
  void LeapOnEveryRead(int64_t leap_ms) { leap_ns_ = leap_ms * 1'000'000; }
  uint64_t monotonic_reads() const { return reads_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> offset_ns_{0};
  std::atomic<int64_t> leap_ns_{0};
  std::atomic<uint64_t> reads_{0};
};

}  // namespace gpuctl::client::testing

#endif  // GPUCTL_CLIENT_LIB_SRC_STEERABLE_CLOCK_FOR_TEST_H_
