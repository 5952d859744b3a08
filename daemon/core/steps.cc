#include "daemon/core/steps.h"

#include <algorithm>

#include "gpuctl/v1/step_page.h"

namespace gpuctl::daemon {
namespace {

// The ring's entries from oldest to newest, plausible ones only.
void ReadRing(const StepPageFields& fields, StepReading& reading) {
  reading.durations_total = fields.durations_written;
  const uint64_t kept = std::min<uint64_t>(fields.durations_written, steps::kStepRingSize);
  reading.recent_durations.reserve(kept);
  for (uint64_t i = fields.durations_written - kept; i < fields.durations_written; ++i) {
    const int64_t ns = fields.durations[i % steps::kStepRingSize];
    if (ns <= 0 || absl::Nanoseconds(ns) > kMaxPlausibleStepPeriod) continue;
    reading.recent_durations.push_back(absl::Nanoseconds(ns));
  }
}

}  // namespace

StepReading InterpretStepPage(const StepPageFields& fields) {
  StepReading reading;
  if (fields.magic != steps::kStepPageMagic ||
      fields.version < steps::kStepPageVersionWithoutRing ||
      fields.version > steps::kStepPageVersion) {
    return reading;
  }
  if (fields.next_step == 0 || fields.next_step - 1 > kMaxPlausibleStep) return reading;
  reading.has_step = true;
  reading.current_step = fields.next_step - 1;
  if (fields.last_step_unix_ns > 0) {
    reading.last_step_time = absl::FromUnixNanos(fields.last_step_unix_ns);
  }
  if (fields.period_ns > 0 && absl::Nanoseconds(fields.period_ns) <= kMaxPlausibleStepPeriod) {
    reading.period = absl::Nanoseconds(fields.period_ns);
  }
  if (fields.version >= 2) ReadRing(fields, reading);
  return reading;
}

uint64_t PickStartStep(int64_t largest_current, uint32_t roundup, uint32_t margin) {
  const __int128 k = roundup == 0 ? 1 : roundup;
  const __int128 base = static_cast<__int128>(largest_current) + margin;
  if (base < 0) return 0;
  // At most INT64_MAX + 2 * UINT32_MAX: always fits in 64 unsigned bits.
  return static_cast<uint64_t>((base / k + 1) * k);
}

}  // namespace gpuctl::daemon
