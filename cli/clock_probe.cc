#include "cli/clock_probe.h"

#include <algorithm>

#include "cli/proto_time.h"
#include "grpc/support/time.h"
#include "grpcpp/client_context.h"

namespace gpuctl::cli {

std::optional<v1::CallerClock> EstimateCallerClock(absl::Span<const ClockProbeSample> samples) {
  const ClockProbeSample* best = nullptr;
  int answered = 0;
  for (const ClockProbeSample& s : samples) {
    const absl::Duration round_trip = s.received - s.sent;
    if (round_trip <= absl::ZeroDuration()) continue;
    ++answered;
    if (best == nullptr || round_trip < best->received - best->sent) best = &s;
  }
  if (best == nullptr) return std::nullopt;
  const absl::Duration round_trip = best->received - best->sent;
  v1::CallerClock clock;
  // Half an odd nanosecond is cut toward zero as the Duration is written.
  ToProtoDuration(best->daemon - (best->sent + round_trip / 2), clock.mutable_offset());
  ToProtoDuration(round_trip, clock.mutable_round_trip());
  clock.set_probes(static_cast<uint32_t>(answered));
  return clock;
}

std::vector<ClockProbeSample> ProbeDaemonClock(v1::Gpuctl::StubInterface& stub, Clock& clock,
                                               const ClockProbeOptions& options,
                                               CancelGroup* cancel) {
  std::vector<ClockProbeSample> samples;
  const absl::Time first = clock.Now();
  const absl::Time stop_starting = std::min(options.deadline, first + options.budget);
  absl::Duration fastest = absl::InfiniteDuration();
  for (int i = 0; i < options.probes; ++i) {
    if (cancel != nullptr && cancel->cancelled()) break;
    const absl::Time sent = clock.Now();
    if (i > 0 && sent >= stop_starting) break;
    absl::Duration limit = std::min(options.probe_timeout, options.deadline - sent);
    if (fastest != absl::InfiniteDuration()) {
      limit = std::min(limit, std::max(kClockProbeSlack * fastest, kClockProbeFloor));
    }
    if (limit <= absl::ZeroDuration()) break;
    grpc::ClientContext context;
    // Relative: gRPC reads its own clock, whatever `clock` is.
    context.set_deadline(gpr_time_from_nanos(absl::ToInt64Nanoseconds(limit), GPR_TIMESPAN));
    v1::ProbeClockResponse response;
    const CancelGroup::Scope scope(cancel, &context);
    const grpc::Status status = stub.ProbeClock(&context, v1::ProbeClockRequest(), &response);
    const absl::Time received = clock.Now();
    if (!status.ok() || !response.has_daemon_time()) break;
    samples.push_back({sent, FromProtoTime(response.daemon_time()), received});
    if (received > sent) fastest = std::min(fastest, received - sent);
  }
  return samples;
}

}  // namespace gpuctl::cli
