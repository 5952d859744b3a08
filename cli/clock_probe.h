#ifndef GPUCTL_CLI_CLOCK_PROBE_H_
#define GPUCTL_CLI_CLOCK_PROBE_H_

#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"
#include "cli/cancel_group.h"
#include "daemon/common/clock.h"
#include "gpuctl/v1/service.grpc.pb.h"

namespace gpuctl::cli {

// Probes a fan-out sends each host right before its Trace request.
inline constexpr int kClockProbes = 4;
// No probe starts later than this after the first: the start instant's
// delay (500 ms by default) covers the whole fan-out, and a slow host's
// probes must not eat it. A LAN host answers the four in about a
// millisecond.
inline constexpr absl::Duration kClockProbeBudget = absl::Milliseconds(20);
// The first probe waits at most this long: one slower than that bounds the
// offset no better than the caller_time offset does. A later one waits at
// most kClockProbeSlack times the fastest round trip so far (at least
// kClockProbeFloor): past that it could not give a tighter bound worth the
// wait.
inline constexpr absl::Duration kClockProbeTimeout = absl::Milliseconds(200);
inline constexpr int kClockProbeSlack = 4;
inline constexpr absl::Duration kClockProbeFloor = absl::Milliseconds(1);

// One ProbeClock round trip: sent and received on the caller's clock, the
// daemon's clock in its answer.
struct ClockProbeSample {
  absl::Time sent;
  absl::Time daemon;
  absl::Time received;
};

// The sample with the shortest round trip as TraceRequest.caller_clock:
// offset daemon - (sent + received) / 2, round_trip received - sent, and
// the count of samples. None without a sample of a positive round trip
// (a clock that stood still or stepped back measured nothing).
std::optional<v1::CallerClock> EstimateCallerClock(absl::Span<const ClockProbeSample> samples);

struct ClockProbeOptions {
  int probes = kClockProbes;
  absl::Duration budget = kClockProbeBudget;
  absl::Duration probe_timeout = kClockProbeTimeout;
  // No probe runs past this instant on `clock` (the host's timeout).
  absl::Time deadline = absl::InfiniteFuture();
};

// Sends up to options.probes ProbeClock calls on `stub`, one after the
// other, each timed on `clock`, and returns the answered ones. Probing
// ends early at the first failure (UNIMPLEMENTED from a gpuctld older than
// the call, a timeout as above, an error), at the deadline or the budget,
// and when `cancel` (may be null) is cancelled: each call is registered
// with it. The gRPC deadlines are relative, on gRPC's own clock.
std::vector<ClockProbeSample> ProbeDaemonClock(v1::Gpuctl::StubInterface& stub, Clock& clock,
                                               const ClockProbeOptions& options,
                                               CancelGroup* cancel);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_CLOCK_PROBE_H_
