#include "daemon/scheduler/budget.h"

#include "absl/time/civil_time.h"

namespace gpuctl::daemon::scheduler {
namespace {

bool BlackoutCovers(const Blackout& b, absl::CivilHour hour) {
  const int day_bit = static_cast<int>(absl::GetWeekday(absl::CivilDay(hour)));
  if (b.days != 0 && (b.days & (1u << day_bit)) == 0) return false;
  return hour.hour() >= b.first_hour && hour.hour() < b.end_hour;
}

// Whether the hash draws the slot and its window misses every blackout:
// what counts against the daily cap.
bool DrawnOutsideBlackout(const ScheduleRule& rule, const SlotDecision& d) {
  return d.sampled && !InBlackout(rule, d.start, d.start + rule.window);
}

}  // namespace

absl::string_view SlotOutcomeName(SlotOutcome outcome) {
  switch (outcome) {
    case SlotOutcome::kNotSampled:
      return "not sampled";
    case SlotOutcome::kCapture:
      return "capture";
    case SlotOutcome::kBlackout:
      return "blackout";
    case SlotOutcome::kDailyCap:
      return "daily cap reached";
    case SlotOutcome::kHostCaptureTime:
      return "host capture time per day spent (local, may split a job)";
    case SlotOutcome::kWindowPassed:
      return "window already started when decided (local: a start mid-slot, or a late clock "
             "or wake-up)";
    case SlotOutcome::kNoStepCounter:
      return "no step counter (a Kineto process, or a library sharing none; local)";
    case SlotOutcome::kStoreSpace:
      return "store free space below the minimum (local, may split a job)";
    case SlotOutcome::kCoolDown:
      return "anomaly within the cool-down of the last capture (local)";
    case SlotOutcome::kHostDailyCap:
      return "anomaly captures of the job today reached daily_cap (local)";
    case SlotOutcome::kPreempted:
      return "preempted by an on-demand trace (local)";
    case SlotOutcome::kProcessBusy:
      return "process busy: already capturing or held by another profiler (local)";
    case SlotOutcome::kRefused:
      return "refused by this daemon (local)";
  }
  return "unknown";
}

absl::string_view SlotOutcomeLabel(SlotOutcome outcome) {
  switch (outcome) {
    case SlotOutcome::kNotSampled:
      return "not_sampled";
    case SlotOutcome::kCapture:
      return "capture";
    case SlotOutcome::kBlackout:
      return "blackout";
    case SlotOutcome::kDailyCap:
      return "daily_cap";
    case SlotOutcome::kHostCaptureTime:
      return "host_capture_time";
    case SlotOutcome::kWindowPassed:
      return "window_passed";
    case SlotOutcome::kNoStepCounter:
      return "no_step_counter";
    case SlotOutcome::kStoreSpace:
      return "store_space";
    case SlotOutcome::kCoolDown:
      return "cool_down";
    case SlotOutcome::kHostDailyCap:
      return "host_daily_cap";
    case SlotOutcome::kPreempted:
      return "preempted";
    case SlotOutcome::kProcessBusy:
      return "process_busy";
    case SlotOutcome::kRefused:
      return "refused";
  }
  return "unknown";
}

bool IsLocalOutcome(SlotOutcome outcome) {
  return outcome == SlotOutcome::kHostCaptureTime || outcome == SlotOutcome::kStoreSpace ||
         outcome == SlotOutcome::kWindowPassed || outcome == SlotOutcome::kNoStepCounter ||
         outcome == SlotOutcome::kCoolDown || outcome == SlotOutcome::kHostDailyCap ||
         outcome == SlotOutcome::kPreempted || outcome == SlotOutcome::kProcessBusy ||
         outcome == SlotOutcome::kRefused;
}

bool InBlackout(const ScheduleRule& rule, absl::Time start, absl::Time end) {
  if (rule.blackouts.empty() || end <= start) return false;
  const absl::TimeZone utc = absl::UTCTimeZone();
  const absl::CivilHour last = absl::ToCivilHour(end - absl::Nanoseconds(1), utc);
  for (absl::CivilHour h = absl::ToCivilHour(start, utc); h <= last; ++h) {
    for (const Blackout& b : rule.blackouts) {
      if (BlackoutCovers(b, h)) return true;
    }
  }
  return false;
}

SlotOutcome SharedSlotOutcome(absl::string_view seed, const ScheduleRule& rule,
                              absl::string_view job_id, const SlotDecision& decision) {
  if (!decision.sampled) return SlotOutcome::kNotSampled;
  if (InBlackout(rule, decision.start, decision.start + rule.window)) return SlotOutcome::kBlackout;
  if (rule.daily_cap == 0) return SlotOutcome::kCapture;
  const absl::TimeZone utc = absl::UTCTimeZone();
  const absl::Time day_start = absl::FromCivil(absl::ToCivilDay(decision.slot_start, utc), utc);
  // The first slot starting on that day.
  int64_t first = SlotOf(rule.period, day_start);
  if (SlotStart(rule.period, first) < day_start) ++first;
  uint32_t earlier = 0;
  for (int64_t s = first; s < decision.slot; ++s) {
    if (DrawnOutsideBlackout(rule, DecideSlot(seed, rule, job_id, s)) &&
        ++earlier >= rule.daily_cap) {
      return SlotOutcome::kDailyCap;
    }
  }
  return SlotOutcome::kCapture;
}

SlotOutcome LocalSlotOutcome(const ScheduleOptions& options, const HostUsage& usage,
                             absl::Duration window) {
  if (options.capture_time_per_day > absl::ZeroDuration() &&
      usage.capture_time_today + window > options.capture_time_per_day) {
    return SlotOutcome::kHostCaptureTime;
  }
  if (usage.free_store_bytes < options.min_free_store_bytes) return SlotOutcome::kStoreSpace;
  return SlotOutcome::kCapture;
}

SlotVerdict DecideJobSlot(const ScheduleOptions& options, const ScheduleRule& rule,
                          absl::string_view job_id, int64_t slot, const HostUsage& usage) {
  SlotVerdict v;
  v.decision = DecideSlot(options.seed, rule, job_id, slot);
  v.outcome = SharedSlotOutcome(options.seed, rule, job_id, v.decision);
  if (v.outcome == SlotOutcome::kCapture) v.outcome = LocalSlotOutcome(options, usage, rule.window);
  return v;
}

}  // namespace gpuctl::daemon::scheduler
