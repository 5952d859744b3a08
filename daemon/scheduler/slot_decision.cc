#include "daemon/scheduler/slot_decision.h"

#include "daemon/common/trace_id.h"
#include "daemon/scheduler/schedule_hash.h"

namespace gpuctl::daemon::scheduler {

int64_t SlotOf(absl::Duration period, absl::Time now) {
  absl::Duration since = now - absl::UnixEpoch();
  absl::Duration remainder;
  int64_t slot = absl::IDivDuration(since, period, &remainder);
  // IDivDuration truncates toward zero; slots floor.
  if (remainder < absl::ZeroDuration()) --slot;
  return slot;
}

absl::Time SlotStart(absl::Duration period, int64_t slot) {
  return absl::UnixEpoch() + period * slot;
}

SlotDecision DecideSlot(absl::string_view seed, const ScheduleRule& rule, absl::string_view job_id,
                        int64_t slot) {
  const ScheduleDigest digest = ScheduleHash(HashDomain::kTimeSlot, seed, rule.name, job_id, slot);
  SlotDecision d;
  d.slot = slot;
  d.draw = DigestUniform(digest);
  d.sampled = d.draw < rule.probability;
  d.slot_start = SlotStart(rule.period, slot);
  // Whole milliseconds, so the id's timestamp is the start itself.
  const int64_t room_ms = absl::ToInt64Milliseconds(rule.period - rule.window);
  const uint64_t offset_ms =
      room_ms <= 0 ? 0 : DigestOffsetBits(digest) % (static_cast<uint64_t>(room_ms) + 1);
  d.start = d.slot_start + absl::Milliseconds(static_cast<int64_t>(offset_ms));
  d.trace_id = FormatTraceId(d.start, DigestIdBits(digest));
  return d;
}

uint64_t StepBlockOf(const ScheduleRule& rule, uint64_t step) {
  return rule.step_period == 0 ? 0 : step / rule.step_period;
}

StepBlockDecision DecideStepBlock(absl::string_view seed, const ScheduleRule& rule,
                                  absl::string_view job_id, uint64_t block, absl::Time anchor) {
  const ScheduleDigest digest =
      ScheduleHash(HashDomain::kStepBlock, seed, rule.name, job_id, static_cast<int64_t>(block));
  StepBlockDecision d;
  d.block = block;
  d.draw = DigestUniform(digest);
  d.sampled = d.draw < rule.probability;
  d.first_step = block * rule.step_period;
  const absl::Time hour = absl::UnixEpoch() + kStepIdAnchor * SlotOf(kStepIdAnchor, anchor);
  d.trace_id = FormatTraceId(hour, DigestIdBits(digest));
  return d;
}

AnomalyDecision DecideAnomaly(absl::string_view seed, const ScheduleRule& rule,
                              absl::string_view job_id, uint64_t step, uint64_t earliest_step,
                              absl::Time anchor) {
  const uint64_t b = rule.anomaly.step_bucket == 0 ? 1 : rule.anomaly.step_bucket;
  AnomalyDecision d;
  d.bucket = step / b;
  d.first_step = (d.bucket + 1) * b;
  if (d.first_step < earliest_step) d.first_step = (earliest_step + b - 1) / b * b;
  const ScheduleDigest digest = ScheduleHash(HashDomain::kAnomalyBucket, seed, rule.name, job_id,
                                             static_cast<int64_t>(d.bucket));
  const absl::Time hour = absl::UnixEpoch() + kStepIdAnchor * SlotOf(kStepIdAnchor, anchor);
  d.trace_id = FormatTraceId(hour, DigestIdBits(digest));
  return d;
}

}  // namespace gpuctl::daemon::scheduler
