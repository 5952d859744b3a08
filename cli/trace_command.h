#ifndef GPUCTL_CLI_TRACE_COMMAND_H_
#define GPUCTL_CLI_TRACE_COMMAND_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cli/command_env.h"
#include "cli/host_list.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::cli {

inline constexpr char kDefaultOutputRoot[] = "gpuctl-traces";
// Defaults of the trace flags (docs/cli.md).
inline constexpr absl::Duration kDefaultStartDelay = absl::Milliseconds(500);
inline constexpr absl::Duration kDefaultMaxStartSkew = absl::Milliseconds(50);
inline constexpr absl::Duration kDefaultHostTimeout = absl::Seconds(10);
inline constexpr size_t kDefaultParallel = 64;
inline constexpr size_t kMaxParallel = 1024;
// gpuctld refuses a start instant further ahead than this, and a larger skew.
inline constexpr absl::Duration kMaxStartDelay = absl::Hours(1);
inline constexpr uint32_t kMaxIterations = 1000000;

// The activity names gpuctld accepts (service.proto
// TraceRequest.activities): GPU activity (docs/cupti.md), then the host
// context gpuctld records itself (docs/host-context.md).
inline constexpr std::array<absl::string_view, 11> kActivityNames = {
    "kernel", "memcpy",   "memset", "runtime", "driver", "sync",
    "nvtx",   "overhead", "memory", "cpu",     "sched"};

struct TraceOptions {
  std::vector<HostSpec> hosts;
  v1::ProcessSelector selector;
  // Required for a time window; for an iteration window the bound of the
  // wait (unset: the daemon's maximum).
  std::optional<absl::Duration> duration;
  std::string trace_id;                                      // empty: a new UUIDv7
  std::vector<std::string> activities;                       // empty: the daemon's default set
  std::vector<std::string> kineto_options;                   // TraceRequest.kineto_options
  v1::HostUnwind host_unwind = v1::HOST_UNWIND_UNSPECIFIED;  // --unwind
  std::string output_root = kDefaultOutputRoot;
  bool download = true;
  bool json = false;
  // Time windows: every host opens at now + start_delay (computed once).
  // Unset: to one host no instant is sent and the daemon's start delay
  // applies; several hosts open at now + kDefaultStartDelay.
  std::optional<absl::Duration> start_delay;
  absl::Duration max_start_skew = kDefaultMaxStartSkew;
  // Iteration windows when iterations > 0.
  uint32_t iterations = 0;
  std::optional<uint64_t> start_step;  // unset: picked from the current steps
  uint32_t step_roundup = 1;
  std::optional<uint32_t> step_margin;  // unset: AutoStepMargin
  size_t parallel = kDefaultParallel;
  absl::Duration host_timeout = kDefaultHostTimeout;
};

// `gpuctl trace`: runs the Trace stream on every host with progress on
// env.err, downloads the stored files into <output_root>/<trace_id>/ and
// prints the per-process table (or one JSON document) on env.out. Returns
// an exit code (cli/exit_codes.h). Options are already validated.
int RunTrace(const TraceOptions& options, const CliEnv& env);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_TRACE_COMMAND_H_
