// Time for the client library, injected so tests can control it.
#ifndef GPUCTL_CLIENT_LIB_SRC_CLOCK_H_
#define GPUCTL_CLIENT_LIB_SRC_CLOCK_H_

#include <time.h>

#include <cstdint>

namespace gpuctl::client {

class Clock {
 public:
  virtual ~Clock() = default;
  // CLOCK_REALTIME ns: capture windows are wall-clock instants shared with
  // the daemon, and records carry wall-clock timestamps.
  virtual int64_t RealtimeNs() = 0;
  // CLOCK_MONOTONIC ns, for timeouts.
  virtual int64_t MonotonicNs() = 0;
};

inline int64_t ReadClockNs(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

class RealClock final : public Clock {
 public:
  int64_t RealtimeNs() override { return ReadClockNs(CLOCK_REALTIME); }
  int64_t MonotonicNs() override { return ReadClockNs(CLOCK_MONOTONIC); }
};

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_CLOCK_H_
