#ifndef GPUCTL_DAEMON_SCHEDULER_SCHEDULE_PREVIEW_H_
#define GPUCTL_DAEMON_SCHEDULER_SCHEDULE_PREVIEW_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/scheduler/budget.h"
#include "daemon/scheduler/schedule_options.h"

namespace gpuctl::daemon::scheduler {

// A slot the schedule draws for a job, and what the shared budgets make
// of it (kCapture, kBlackout or kDailyCap).
struct PreviewEntry {
  size_t rule_index = 0;
  SlotDecision decision;
  SlotOutcome outcome = SlotOutcome::kCapture;
};

struct Preview {
  // By start instant, then rule order.
  std::vector<PreviewEntry> entries;
  // More drawn slots lay in the range than `max_entries`.
  bool truncated = false;
};

// Slot evaluations one preview may make (each a SHA-256, about a
// microsecond), so that a preview holds a thread of the daemon's I/O pool
// (which also converts on-demand traces) for a fraction of a second: the
// daily cap counts from the start of the first day, so a 1 s period over a
// day stays under it, over a week it does not.
inline constexpr size_t kMaxPreviewEvaluations = size_t{256} << 10;

// The drawn slots of the time rules whose window starts in [from, to),
// for job `job_id`, as every host with this schedule decides them
// (SharedSlotOutcome, computed in one pass per UTC day rather than per
// slot). Rules whose selector names another job are left out; step rules
// too (they follow step numbers, not time). INVALID_ARGUMENT when the
// range needs more than kMaxPreviewEvaluations slot evaluations.
absl::StatusOr<Preview> PreviewJob(const ScheduleOptions& options, absl::string_view job_id,
                                   absl::Time from, absl::Time to, size_t max_entries);

}  // namespace gpuctl::daemon::scheduler

#endif  // GPUCTL_DAEMON_SCHEDULER_SCHEDULE_PREVIEW_H_
