#ifndef GPUCTL_DAEMON_COMMON_CLOCK_H_
#define GPUCTL_DAEMON_COMMON_CLOCK_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace gpuctl {

// Wall clock (CLOCK_REALTIME): capture windows are wall-clock instants shared
// with the client library. Injected so core logic never reads time itself.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;
};

class RealClock final : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
};

}  // namespace gpuctl

#endif  // GPUCTL_DAEMON_COMMON_CLOCK_H_
