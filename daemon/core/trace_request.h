#ifndef GPUCTL_DAEMON_CORE_TRACE_REQUEST_H_
#define GPUCTL_DAEMON_CORE_TRACE_REQUEST_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gpuctl/v1/manifest.pb.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon {

inline constexpr uint32_t kMaxIterations = 1000000;
// How far ahead of the daemon's clock a start instant may be.
inline constexpr absl::Duration kMaxStartAhead = absl::Hours(1);
inline constexpr absl::Duration kMaxStartSkew = absl::Hours(1);
inline constexpr absl::Duration kDefaultMaxStartSkew = absl::Milliseconds(50);
// TraceRequest.caller_clock: a probe slower than this measured nothing
// useful, and no two clocks are this far apart.
inline constexpr absl::Duration kMaxProbeRoundTrip = absl::Minutes(1);
inline constexpr absl::Duration kMaxCallerClockOffset = absl::Hours(24 * 36525);

// What a valid TraceRequest asks for, in the daemon's terms.
struct TracePlan {
  // Time window: the start instant (the request's, else receipt plus the
  // daemon's start delay; past by at most max_start_skew). Iteration
  // window: receipt.
  absl::Time start;
  // start + the window length, or + the bound of an iteration window.
  absl::Time end;
  absl::Duration max_start_skew = kDefaultMaxStartSkew;
  uint32_t iterations = 0;
  // The request's start step, when it names one.
  std::optional<uint64_t> start_step;
  // Set when the request carries caller_time; with its caller_clock too,
  // midpoint_offset and round_trip.
  std::optional<v1::ClockOffset> clock;
};

struct TraceLimits {
  absl::Duration max_duration;
  absl::Duration start_delay;
};

// Validates every field of `request` but the trace id, received at
// `received_at` (whole nanoseconds): INVALID_ARGUMENT with a message naming
// the field and the rule. Rules: a selector with a criterion and valid
// values (ValidateSelector); a duration in (0, max] (optional for an
// iteration window: the max); start_time from max_start_skew in the past
// (never before 1970) to one hour ahead; max_start_skew in [0, 1h];
// iterations at most kMaxIterations; start_step only with iterations and at
// most kMaxPlausibleStep; known activities; caller_clock only with
// caller_time, its round trip in (0, kMaxProbeRoundTrip] and its offset
// within kMaxCallerClockOffset either way.
absl::StatusOr<TracePlan> PlanTrace(const v1::TraceRequest& request, absl::Time received_at,
                                    const TraceLimits& limits);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_TRACE_REQUEST_H_
