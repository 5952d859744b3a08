#ifndef GPUCTL_DAEMON_SCHEDULER_SLOT_DECISION_H_
#define GPUCTL_DAEMON_SCHEDULER_SLOT_DECISION_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/scheduler/schedule_options.h"

namespace gpuctl::daemon::scheduler {

// The pure decisions every host makes alike. A time rule's slots are
// [epoch + s*period, epoch + (s+1)*period) with the Unix epoch; hosts must
// agree on the time to well under the window for their captures to line
// up (a host whose clock is off by more opens late and says so).

// The slot holding `now`: floor((now - epoch) / period). `period` > 0.
int64_t SlotOf(absl::Duration period, absl::Time now);
absl::Time SlotStart(absl::Duration period, int64_t slot);

struct SlotDecision {
  int64_t slot = 0;
  // Whether the hash draws this slot (uniform < probability), before any
  // budget or blackout.
  bool sampled = false;
  // The hash's draw in [0, 1).
  double draw = 0;
  absl::Time slot_start;
  // The window [start, start + rule.window), inside the slot: the start is
  // slot_start plus a whole-millisecond offset in [0, period - window]
  // from the same hash, so jobs sampled in one slot spread over it.
  absl::Time start;
  // A UUIDv7 of `start` whose random bits come from the hash.
  std::string trace_id;
};

// The decision of a time rule for (seed, rule, job, slot).
SlotDecision DecideSlot(absl::string_view seed, const ScheduleRule& rule, absl::string_view job_id,
                        int64_t slot);

struct StepBlockDecision {
  uint64_t block = 0;
  bool sampled = false;
  double draw = 0;
  // Steps [first_step, first_step + rule.window_steps).
  uint64_t first_step = 0;
  std::string trace_id;
};

// Trace ids of step blocks carry a time too. Hosts share no instant for a
// step, so the id's time is the start of the UTC hour (`anchor` rounded
// down to kStepIdAnchor) in which the host decides: hosts deciding on
// either side of an hour's start give one block two ids.
inline constexpr absl::Duration kStepIdAnchor = absl::Hours(1);

// The block holding `step`: floor(step / rule.step_period).
uint64_t StepBlockOf(const ScheduleRule& rule, uint64_t step);

// The decision of a step rule for (seed, rule, job, block).
StepBlockDecision DecideStepBlock(absl::string_view seed, const ScheduleRule& rule,
                                  absl::string_view job_id, uint64_t block, absl::Time anchor);

struct AnomalyDecision {
  // floor(step / anomaly.step_bucket) of the anomaly's step.
  uint64_t bucket = 0;
  // A step window's first step: the first multiple of step_bucket after
  // the bucket that is at least `earliest_step` (so hosts deciding within
  // one bucket agree while it is ahead of them).
  uint64_t first_step = 0;
  // A UUIDv7 of the UTC hour of `anchor` (as step blocks, kStepIdAnchor)
  // whose random bits come from the hash of (seed, rule, job, bucket).
  std::string trace_id;
};

// The capture of an anomaly rule's anomaly at `step` for `job_id`. Every
// host that sees an anomaly in the same bucket in the same hour names its
// capture alike; each host still decides for itself whether it saw one.
AnomalyDecision DecideAnomaly(absl::string_view seed, const ScheduleRule& rule,
                              absl::string_view job_id, uint64_t step, uint64_t earliest_step,
                              absl::Time anchor);

}  // namespace gpuctl::daemon::scheduler

#endif  // GPUCTL_DAEMON_SCHEDULER_SLOT_DECISION_H_
