#include "cli/step_target.h"

#include <algorithm>
#include <limits>

#include "absl/status/status.h"

namespace gpuctl::cli {

absl::StatusOr<uint64_t> TargetStartStep(std::optional<uint64_t> largest, uint64_t roundup,
                                         uint64_t margin) {
  if (roundup == 0) return absl::InvalidArgumentError("the step roundup must be at least 1");
  // 128-bit arithmetic: steps and margins are full 64-bit values.
  __int128 m = largest ? static_cast<__int128>(*largest) : -1;
  __int128 base = m + static_cast<__int128>(margin);
  if (base < 0) return 0;
  __int128 k = roundup;
  __int128 target = (base / k + 1) * k;
  if (target > std::numeric_limits<uint64_t>::max()) {
    return absl::OutOfRangeError("the start step does not fit in 64 bits");
  }
  return static_cast<uint64_t>(target);
}

uint64_t AutoStepMargin(absl::Duration start_delay, std::optional<absl::Duration> fastest_period) {
  if (!fastest_period || *fastest_period <= absl::ZeroDuration() ||
      start_delay <= absl::ZeroDuration()) {
    return kMinStepMargin;
  }
  // ceil(start_delay / period) in whole nanoseconds, capped: a period of a
  // nanosecond against a day of delay must not overflow.
  const int64_t delay_ns = absl::ToInt64Nanoseconds(start_delay);
  const int64_t period_ns = std::max<int64_t>(1, absl::ToInt64Nanoseconds(*fastest_period));
  const uint64_t steps = static_cast<uint64_t>(delay_ns / period_ns + (delay_ns % period_ns != 0));
  return std::max<uint64_t>(kMinStepMargin, steps + 1);
}

}  // namespace gpuctl::cli
