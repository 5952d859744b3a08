#ifndef GPUCTL_DAEMON_SCHEDULER_BUDGET_H_
#define GPUCTL_DAEMON_SCHEDULER_BUDGET_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/scheduler/schedule_options.h"
#include "daemon/scheduler/slot_decision.h"

namespace gpuctl::daemon::scheduler {

// What a rule does with a job's slot. The shared outcomes follow from the
// configuration and the hash alone, so every host of the job reaches the
// same one; the local ones depend on this host and may split a job's
// trace (some hosts capture, others skip).
enum class SlotOutcome {
  kNotSampled,  // shared: the hash did not draw the slot
  kCapture,
  kBlackout,         // shared: the window touches a blackout hour
  kDailyCap,         // shared: the job's captures today reached daily_cap
  kHostCaptureTime,  // local: capture_time_per_day spent on this host
  kStoreSpace,       // local: the store has less than min_free_store_bytes free
  // local: the window had already started when this host decided the slot
  // (it started mid-slot, or its clock or its wake-up was late)
  kWindowPassed,
  // local: a step rule's process shares no step counter (a Kineto
  // process, or a library without one): steps cannot be aligned for it
  kNoStepCounter,
  // local: an anomaly rule saw an anomaly within the cool-down of its
  // last one for the job on this host
  kCoolDown,
  // local: an anomaly rule's captures of the job today (UTC) on this host
  // reached daily_cap
  kHostDailyCap,
  // local: an on-demand trace took a process of the capture over (an
  // on-demand trace has priority); the event names the process and trace
  kPreempted,
  // local: a process of the capture was busy when its window opened: it
  // was already capturing (an on-demand trace, which has priority, or
  // another gpuctl trace) or another profiler held it (the job's own
  // torch.profiler, a CUPTI subscriber); the event names the process and
  // the reason, the rest of the job's processes were captured
  kProcessBusy,
  // local: this daemon refused the capture request (a window already in
  // the past of its clock, a limit of the core); the event carries the
  // error
  kRefused,
};

// "not sampled", "blackout", "daily cap reached", ... for skips and logs.
absl::string_view SlotOutcomeName(SlotOutcome outcome);
// "not_sampled", "capture", "daily_cap", ...: a short, stable name, for
// metric labels.
absl::string_view SlotOutcomeLabel(SlotOutcome outcome);
// True for the outcomes one host decides alone.
bool IsLocalOutcome(SlotOutcome outcome);

// Whether any instant of [start, end) lies in one of the rule's blackouts
// (UTC weekday and hour).
bool InBlackout(const ScheduleRule& rule, absl::Time start, absl::Time end);

// The slot's shared outcome: kNotSampled, kBlackout, kDailyCap or kCapture.
// The daily cap counts the job's slots of the same UTC day (the day of the
// slot's start) before `slot` that the hash draws outside a blackout, so
// it is recomputed alike by every host and after a restart; slots that a
// host skipped for a local reason, or whose job it did not run, count too.
SlotOutcome SharedSlotOutcome(absl::string_view seed, const ScheduleRule& rule,
                              absl::string_view job_id, const SlotDecision& decision);

// This host's use of its limits, as the driver tracks them.
struct HostUsage {
  // Capture window time started today (UTC) by scheduled captures.
  absl::Duration capture_time_today = absl::ZeroDuration();
  uint64_t free_store_bytes = UINT64_MAX;
};

// kCapture, or the local limit that a capture of `window` would break.
SlotOutcome LocalSlotOutcome(const ScheduleOptions& options, const HostUsage& usage,
                             absl::Duration window);

// Everything together: the shared outcome, then the local limits.
struct SlotVerdict {
  SlotDecision decision;
  SlotOutcome outcome = SlotOutcome::kNotSampled;
};
SlotVerdict DecideJobSlot(const ScheduleOptions& options, const ScheduleRule& rule,
                          absl::string_view job_id, int64_t slot, const HostUsage& usage);

}  // namespace gpuctl::daemon::scheduler

#endif  // GPUCTL_DAEMON_SCHEDULER_BUDGET_H_
