#include "daemon/core/trace_request.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/common/excerpt.h"
#include "daemon/convert/cupti_names.h"
#include "daemon/core/host_context.h"
#include "daemon/core/peer_channel.h"
#include "daemon/core/proto_time.h"
#include "daemon/core/selector.h"
#include "daemon/core/steps.h"

namespace gpuctl::daemon {
namespace {

// Far more than the distinct names; bounds what a request can carry.
constexpr int kMaxActivities = 64;

// The window length (time window) or the bound (iteration window).
absl::StatusOr<absl::Duration> RequestDuration(const v1::TraceRequest& request,
                                               absl::Duration max_duration) {
  if (!request.has_duration()) {
    if (request.iterations() > 0) return max_duration;
    return absl::InvalidArgumentError("duration is required");
  }
  auto d = FromProtoDuration(request.duration());
  if (!d.ok()) return d.status();
  if (*d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("duration must be positive, got ", absl::FormatDuration(*d)));
  }
  if (*d > max_duration) {
    return absl::InvalidArgumentError(absl::StrCat("duration ", absl::FormatDuration(*d),
                                                   " exceeds this daemon's maximum of ",
                                                   absl::FormatDuration(max_duration)));
  }
  return *d;
}

absl::Status ValidateSteps(const v1::TraceRequest& request) {
  if (request.iterations() > kMaxIterations) {
    return absl::InvalidArgumentError(absl::StrCat("iterations ", request.iterations(),
                                                   " exceeds the maximum of ", kMaxIterations));
  }
  if (request.has_start_step() && request.iterations() == 0) {
    return absl::InvalidArgumentError("start_step needs iterations (an iteration window)");
  }
  if (request.has_start_step() && request.start_step() > kMaxPlausibleStep) {
    return absl::InvalidArgumentError(absl::StrCat("start_step ", request.start_step(),
                                                   " exceeds the maximum of ", kMaxPlausibleStep));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> RequestStartSkew(const v1::TraceRequest& request) {
  if (!request.has_max_start_skew()) return kDefaultMaxStartSkew;
  auto skew = FromProtoDuration(request.max_start_skew());
  if (!skew.ok()) return skew.status();
  if (*skew < absl::ZeroDuration() || *skew > kMaxStartSkew) {
    return absl::InvalidArgumentError(absl::StrCat("max_start_skew ", absl::FormatDuration(*skew),
                                                   " is not between 0 and ",
                                                   absl::FormatDuration(kMaxStartSkew)));
  }
  return *skew;
}

absl::Status ValidateHostUnwind(const v1::TraceRequest& request) {
  if (!v1::HostUnwind_IsValid(request.host_unwind())) {
    return absl::InvalidArgumentError(
        absl::StrCat("host_unwind ", request.host_unwind(), " is not a known unwinding"));
  }
  if (request.host_unwind() == v1::HOST_UNWIND_DWARF && !HostContextOf(request).samples) {
    return absl::InvalidArgumentError(
        absl::StrCat("host_unwind DWARF needs the ", kHostActivityCpu, " activity"));
  }
  return absl::OkStatus();
}

absl::Status ValidateActivities(const v1::TraceRequest& request) {
  if (request.activities_size() > kMaxActivities) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", kMaxActivities,
                                                   " activities; valid: ", ActivityNameList(), ", ",
                                                   kHostActivityCpu, ", ", kHostActivitySched));
  }
  // The host context names (docs/host-context.md) are the daemon's own;
  // the rest go to the processes.
  if (absl::Status st = ValidateActivityNames(GpuActivitiesOf(request)); !st.ok()) {
    return absl::Status(
        st.code(), absl::StrCat(st.message(), ", ", kHostActivityCpu, ", ", kHostActivitySched));
  }
  return absl::OkStatus();
}

absl::Status ValidateKinetoOptions(const v1::TraceRequest& request) {
  std::vector<std::string> seen;
  for (const std::string& option : request.kineto_options()) {
    bool known = false;
    for (const char* name : kKinetoOptionNames) known = known || option == name;
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown kineto option \"", Excerpt(option),
                       "\"; valid: with_stack, record_shapes, profile_memory, with_flops, "
                       "with_modules"));
    }
    if (std::find(seen.begin(), seen.end(), option) != seen.end()) {
      return absl::InvalidArgumentError(absl::StrCat("kineto option ", option, " given twice"));
    }
    seen.push_back(option);
  }
  return absl::OkStatus();
}

// `max_start_skew` also bounds how far in the past the instant may be: past
// it, no process could open on time.
absl::StatusOr<absl::Time> RequestStart(const v1::TraceRequest& request, absl::Time now,
                                        absl::Duration start_delay, absl::Duration max_start_skew) {
  if (!request.has_start_time()) return now + start_delay;
  absl::StatusOr<absl::Time> t = FromProtoTimestamp(request.start_time(), "start_time");
  if (!t.ok()) return t.status();
  if (*t - now > kMaxStartAhead) {
    return absl::InvalidArgumentError(absl::StrCat("start_time is ", absl::FormatDuration(*t - now),
                                                   " ahead of this daemon's clock, more than ",
                                                   absl::FormatDuration(kMaxStartAhead),
                                                   " (clocks out of sync?)"));
  }
  if (now - *t > max_start_skew) {
    return absl::InvalidArgumentError(absl::StrCat(
        "start_time is ", absl::FormatDuration(now - *t),
        " in the past of this daemon's clock, more than the max start skew ",
        absl::FormatDuration(max_start_skew),
        ": no process could open on time (send a later instant or a larger max_start_skew; "
        "clocks out of sync?)"));
  }
  return *t;
}

// The clock offsets the request carries: caller_time's, and the measured
// midpoint of caller_clock.
absl::StatusOr<std::optional<v1::ClockOffset>> RequestClock(const v1::TraceRequest& request,
                                                            absl::Time received_at) {
  if (!request.has_caller_time()) {
    if (request.has_caller_clock()) {
      return absl::InvalidArgumentError("caller_clock needs caller_time");
    }
    return std::nullopt;
  }
  absl::StatusOr<absl::Time> caller = FromProtoTimestamp(request.caller_time(), "caller_time");
  if (!caller.ok()) return caller.status();
  v1::ClockOffset clock;
  *clock.mutable_offset() = ToProtoDuration(received_at - *caller);
  *clock.mutable_caller_time() = request.caller_time();
  *clock.mutable_received_at() = ToProtoTimestamp(received_at);
  if (!request.has_caller_clock()) return clock;
  const v1::CallerClock& measured = request.caller_clock();
  absl::StatusOr<absl::Duration> round_trip = FromProtoDuration(measured.round_trip());
  if (!round_trip.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("caller_clock.round_trip: ", round_trip.status().message()));
  }
  if (*round_trip <= absl::ZeroDuration() || *round_trip > kMaxProbeRoundTrip) {
    return absl::InvalidArgumentError(
        absl::StrCat("caller_clock.round_trip ", absl::FormatDuration(*round_trip),
                     " is not in (0, ", absl::FormatDuration(kMaxProbeRoundTrip), "]"));
  }
  absl::StatusOr<absl::Duration> offset = FromProtoDuration(measured.offset());
  if (!offset.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("caller_clock.offset: ", offset.status().message()));
  }
  if (absl::AbsDuration(*offset) > kMaxCallerClockOffset) {
    return absl::InvalidArgumentError(absl::StrCat(
        "caller_clock.offset ", absl::FormatDuration(*offset), " is more than ",
        absl::FormatDuration(kMaxCallerClockOffset), " either way (not a clock offset)"));
  }
  *clock.mutable_midpoint_offset() = ToProtoDuration(*offset);
  *clock.mutable_round_trip() = ToProtoDuration(*round_trip);
  return clock;
}

}  // namespace

absl::StatusOr<TracePlan> PlanTrace(const v1::TraceRequest& request, absl::Time received_at,
                                    const TraceLimits& limits) {
  if (auto st = ValidateSteps(request); !st.ok()) return st;
  absl::StatusOr<absl::Duration> duration = RequestDuration(request, limits.max_duration);
  if (!duration.ok()) return duration.status();
  if (!HasCriterion(request.selector())) {
    return absl::InvalidArgumentError("select processes with a job id, pids, ranks or labels");
  }
  if (auto st = ValidateSelector(request.selector()); !st.ok()) return st;
  if (auto st = ValidateActivities(request); !st.ok()) return st;
  if (auto st = ValidateHostUnwind(request); !st.ok()) return st;
  if (auto st = ValidateKinetoOptions(request); !st.ok()) return st;
  absl::StatusOr<absl::Duration> skew = RequestStartSkew(request);
  if (!skew.ok()) return skew.status();
  absl::StatusOr<absl::Time> start = RequestStart(request, received_at, limits.start_delay, *skew);
  if (!start.ok()) return start.status();

  absl::StatusOr<std::optional<v1::ClockOffset>> clock = RequestClock(request, received_at);
  if (!clock.ok()) return clock.status();

  TracePlan plan;
  plan.clock = *std::move(clock);
  // An iteration window is watched for from receipt until the bound.
  plan.start = request.iterations() > 0 ? received_at : *start;
  plan.end = plan.start + *duration;
  plan.max_start_skew = *skew;
  plan.iterations = request.iterations();
  if (request.has_start_step()) plan.start_step = request.start_step();
  return plan;
}

}  // namespace gpuctl::daemon
