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

// `base` shifted by `offset`: a host whose clock is off, for tests and
// diagnosis (gpuctld --clock-offset). `base` outlives it.
class OffsetClock final : public Clock {
 public:
  OffsetClock(Clock* base, absl::Duration offset) : base_(base), offset_(offset) {}
  absl::Time Now() override { return base_->Now() + offset_; }

 private:
  Clock* base_;
  absl::Duration offset_;
};

}  // namespace gpuctl

#endif  // GPUCTL_DAEMON_COMMON_CLOCK_H_
