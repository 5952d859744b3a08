#ifndef GPUCTL_DAEMON_CORE_STEPS_H_
#define GPUCTL_DAEMON_CORE_STEPS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "gpuctl/v1/step_page.h"

namespace gpuctl::daemon {

// A process's step counter as the daemon understands it.
struct StepReading {
  // The process has marked a step (and shares a counter this daemon reads).
  bool has_step = false;
  // The last marked step; meaningful only with has_step.
  uint64_t current_step = 0;
  std::optional<absl::Time> last_step_time;
  // Recent mean time between marks.
  std::optional<absl::Duration> period;
  // Version 2 pages: how many step durations the process ever wrote, and
  // the most recent of them (at most kStepRingSize, oldest first, each in
  // (0, kMaxPlausibleStepPeriod]; implausible entries are left out).
  // durations_total is 0 and recent_durations empty for a version 1 page.
  uint64_t durations_total = 0;
  std::vector<absl::Duration> recent_durations;
};

// The raw fields of a step counter page (proto/gpuctl/v1/step_page.h), as
// loaded from memory the process writes: untrusted.
struct StepPageFields {
  uint32_t magic = 0;
  uint32_t version = 0;
  uint64_t next_step = 0;
  int64_t last_step_unix_ns = 0;
  int64_t period_ns = 0;
  // Version 2 only.
  uint64_t durations_written = 0;
  std::array<int64_t, steps::kStepRingSize> durations{};
};

// Largest step this daemon believes; a counter past it is treated as no
// counter (it also keeps the start-step arithmetic far from overflow).
inline constexpr uint64_t kMaxPlausibleStep = uint64_t{1} << 62;
// A mean step period above this (or not positive) is reported as unknown.
inline constexpr absl::Duration kMaxPlausibleStepPeriod = absl::Hours(24);

// What a page says: nothing when its magic is wrong, its version is neither
// 1 nor 2 (kStepPageVersionWithoutRing .. kStepPageVersion) or when
// next_step is 0 (no mark yet) or absurd; else the step, with no time when
// the mark time is not positive and no period when it is not in (0, 1 day].
// A version 2 page adds its recent durations; a version 1 page's ring
// fields are not read (they are not part of it).
StepReading InterpretStepPage(const StepPageFields& fields);

// Read-only, live view of one attached process's step counter. Owned by the
// core for as long as the process is attached; the implementation (a shared
// mapping, daemon/ipc/step_counter_page.h) releases its resources when
// destroyed. Read() only loads memory: no system call, no blocking, safe to
// call on the event loop at any time.
class StepCounterView {
 public:
  virtual ~StepCounterView() = default;
  virtual StepReading Read() const = 0;
};

// The start step of an iteration window picked by the daemon: the next
// multiple of `roundup` above `largest_current + margin`, where
// `largest_current` is the largest current step among the selected
// processes, -1 when none has one. `roundup` 0 counts as 1. 0 when
// largest_current + margin is negative.
//   target(m, K, margin) = ((m + margin) / K + 1) * K
uint64_t PickStartStep(int64_t largest_current, uint32_t roundup, uint32_t margin);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_STEPS_H_
