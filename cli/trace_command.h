#ifndef GPUCTL_CLI_TRACE_COMMAND_H_
#define GPUCTL_CLI_TRACE_COMMAND_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cli/command_env.h"

namespace gpuctl::cli {

inline constexpr char kDefaultOutputRoot[] = "gpuctl-traces";

// The GPU activity names gpuctld accepts (service.proto
// TraceRequest.activities, docs/cupti.md).
inline constexpr std::array<absl::string_view, 8> kActivityNames = {
    "kernel", "memcpy", "memset", "runtime", "driver", "sync", "nvtx", "overhead"};

struct TraceOptions {
  std::string target;  // normalized, see NormalizeHost
  std::string job_id;
  std::vector<int32_t> pids;
  absl::Duration duration;
  std::string trace_id;  // empty: the daemon picks one
  std::vector<std::string> activities;  // empty: the daemon's default set
  std::string output_root = kDefaultOutputRoot;
  bool download = true;
  bool json = false;
};

// `gpuctl trace`: runs the Trace stream with progress on env.err, prints the
// per-process table (or JSON) on env.out, then downloads the stored files.
// Returns an exit code (cli/exit_codes.h). Options are already validated.
int RunTrace(const TraceOptions& options, const CliEnv& env);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_TRACE_COMMAND_H_
