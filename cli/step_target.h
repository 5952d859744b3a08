#ifndef GPUCTL_CLI_STEP_TARGET_H_
#define GPUCTL_CLI_STEP_TARGET_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gpuctl::cli {

// The step margin used when the user gives none.
inline constexpr uint32_t kMinStepMargin = 2;

// The first step of an iteration window, picked from the largest current
// step `largest` among the selected processes (nullopt: none has marked a
// step, i.e. -1):
//     target = ((largest + margin) / roundup + 1) * roundup
// the next multiple of `roundup` strictly above largest + margin; 0 when
// largest + margin < 0. gpuctld applies the same formula to its own
// processes. INVALID_ARGUMENT when roundup is 0, OUT_OF_RANGE when the
// target does not fit in 64 bits.
absl::StatusOr<uint64_t> TargetStartStep(std::optional<uint64_t> largest, uint64_t roundup,
                                         uint64_t margin);

// The margin that covers the fan-out: the fastest process (shortest step
// period) may advance start_delay / period steps while the request reaches
// every host, plus one for the step in progress; never below
// kMinStepMargin. Without a known period, kMinStepMargin.
uint64_t AutoStepMargin(absl::Duration start_delay, std::optional<absl::Duration> fastest_period);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_STEP_TARGET_H_
