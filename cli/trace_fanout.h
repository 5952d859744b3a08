#ifndef GPUCTL_CLI_TRACE_FANOUT_H_
#define GPUCTL_CLI_TRACE_FANOUT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli/connection.h"
#include "cli/host_list.h"
#include "cli/host_status.h"
#include "cli/interrupt.h"
#include "cli/trace_progress.h"
#include "daemon/common/clock.h"
#include "daemon/common/task_runner.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::cli {

// What one host's Trace stream delivered, and how it ended.
struct HostTrace {
  std::string target;
  HostStatus status = HostStatus::kOk;
  std::string error;  // set when status is not kOk
  std::optional<v1::TraceStarted> started;
  // Processes that attached later and joined (ProcessProgress.joined).
  std::vector<v1::ProcessInfo> joined;
  std::map<int32_t, v1::ProcessResult> results;  // by pid
  std::optional<v1::TraceCompleted> completed;

  // The host took the request (TraceStarted arrived).
  bool accepted() const { return started.has_value(); }
  // The daemon's host name once it answered, else the target.
  std::string name() const;
  // Selected or joined processes the daemon never reported on.
  std::vector<const v1::ProcessInfo*> Missing() const;
  bool HasFiles() const;
};

struct TraceFanoutOptions {
  // Sent to every host as is, but for caller_time, set right before each
  // host's request is sent, and caller_clock, measured on each host's
  // connection by ProbeClock round trips just before (none when the host
  // does not answer them).
  v1::TraceRequest request;
  // Hosts in their dispatch phase (connect + until TraceStarted) at once.
  size_t parallel = 64;
  // Per host: connect and receive TraceStarted within this.
  absl::Duration host_timeout = absl::Seconds(10);
  // The gRPC deadline of a host's stream is this long after the later of
  // request.start_time and the moment its request is sent: the window plus
  // the longest the daemon may take to collect, convert and store. Without
  // request.start_time the daemon's own start delay comes first: the limit
  // then runs from the instant its TraceStarted announces (the gRPC
  // deadline allows max_daemon_start_delay more).
  absl::Duration stream_length = absl::InfiniteDuration();
  absl::Duration max_daemon_start_delay = absl::Hours(1);
  // A host whose trace has not completed this long after the end it
  // announced (TraceStarted.end_time), and that has sent no event for as
  // long, is given up as timed out: each progress or result event pushes
  // the limit to this long after it, so a daemon still ingesting (it
  // repeats PROCESSING every 10s) is waited for, up to stream_length.
  absl::Duration result_margin = absl::Seconds(60);
  // TLS and token of every host's connection.
  ChannelSecurity security;
};

// What the fan-out takes from its surroundings; members left null get the
// real thing. Not owned; must outlive the call.
struct TraceFanoutDeps {
  // Times host_timeout, the result_margin watchdog, caller_time and the
  // clock probes. The streams' gRPC deadlines (stream_length) are absolute
  // instants on it too, so with a fake clock leave stream_length infinite.
  Clock* clock = nullptr;
  // Where the wake-ups of those waits come due (daemon/common/deadline_wait.h),
  // against `clock`; must also outlive every timer armed on it. Null: the
  // fan-out's threads time their own waits.
  TaskRunner* timers = nullptr;
};

struct TraceFanoutResult {
  std::vector<HostTrace> hosts;  // in the order of the input
  bool interrupted = false;
};

// Runs the Trace stream on every host concurrently and returns when every
// stream has ended. Hosts whose entry carries an error are not contacted
// and come back unreachable. An interrupt from `interrupts` (may be null)
// cancels every stream and the hosts not yet contacted. Progress goes to
// `progress`, whose calls are serialized.
TraceFanoutResult RunTraceFanout(const std::vector<HostEntry>& hosts,
                                 const TraceFanoutOptions& options, InterruptSource* interrupts,
                                 TraceProgress& progress, TraceFanoutDeps deps = {});

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_TRACE_FANOUT_H_
