#ifndef GPUCTL_DAEMON_CORE_SCHEDULE_REPORTER_H_
#define GPUCTL_DAEMON_CORE_SCHEDULE_REPORTER_H_

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon {

// What the daemon's schedule says of itself (GetSchedule): implemented by
// the scheduler, reached by the RPC adapter through this interface so that
// neither knows the other.
class ScheduleReporter {
 public:
  virtual ~ScheduleReporter() = default;
  // Everything but the preview. Loop thread. INVALID_ARGUMENT for a
  // request outside its limits.
  virtual absl::StatusOr<v1::GetScheduleResponse> GetSchedule(
      const v1::GetScheduleRequest& request) = 0;
  // Adds the request's preview to a response, from the response's `now` on.
  // Self-contained (it owns a copy of the schedule) and safe on any thread,
  // so the adapter runs it off the loop: a long preview hashes many slots.
  using PreviewTask = absl::AnyInvocable<absl::Status(v1::GetScheduleResponse&) &&>;
  // Loop thread.
  virtual PreviewTask Preview(const v1::GetScheduleRequest& request) const = 0;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_SCHEDULE_REPORTER_H_
