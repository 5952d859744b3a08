#ifndef GPUCTL_DAEMON_KINETO_DYNO_CONFIG_H_
#define GPUCTL_DAEMON_KINETO_DYNO_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon {

// kineto's own default window when a request names none.
inline constexpr absl::Duration kDynoDefaultDuration = absl::Milliseconds(500);
inline constexpr uint32_t kDynoMaxIterations = 1000000;
inline constexpr size_t kDynoMaxConfigBytes = 16 << 10;

// What gpuctld takes from the free config text of dynolog's
// setKinetOnDemandRequest: the window and the PyTorch profiler options.
// Every other key, ACTIVITIES_LOG_FILE first of all (gpuctld picks where
// traces go), is left out and listed in `ignored_keys`.
struct DynoTraceConfig {
  std::optional<absl::Duration> duration;   // ACTIVITIES_DURATION_MSECS
  std::optional<absl::Time> start_time;     // PROFILE_START_TIME (ms since the epoch; 0: none)
  uint32_t iterations = 0;                  // ACTIVITIES_ITERATIONS (<= 0: a time window)
  std::optional<uint64_t> start_iteration;  // PROFILE_START_ITERATION (0: the daemon picks)
  uint32_t iteration_roundup = 0;           // PROFILE_START_ITERATION_ROUNDUP
  v1::KinetoTraceOptions options;           // PROFILE_* flags
  std::vector<std::string> ignored_keys;    // in the order met, each once
};

// Parses kineto's `KEY=VALUE` lines (blank lines and `#` comments skipped,
// spaces around key and value trimmed). INVALID_ARGUMENT, naming the line,
// for a line without `=`, a bad value of a key gpuctld takes, or text over
// kDynoMaxConfigBytes.
absl::StatusOr<DynoTraceConfig> ParseDynoConfig(absl::string_view text);

// The TraceRequest (without selector) that the config asks for: a time
// window of `duration` (default kDynoDefaultDuration) from `start_time`,
// or `iterations` steps from `start_iteration` rounded as asked.
v1::TraceRequest DynoTraceRequest(const DynoTraceConfig& config);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_KINETO_DYNO_CONFIG_H_
