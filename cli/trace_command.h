#ifndef GPUCTL_CLI_TRACE_COMMAND_H_
#define GPUCTL_CLI_TRACE_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli/command_env.h"

namespace gpuctl::cli {

inline constexpr char kDefaultOutputRoot[] = "gpuctl-traces";

struct TraceOptions {
  std::string target;  // normalized, see NormalizeHost
  std::string job_id;
  std::vector<int32_t> pids;
  absl::Duration duration;
  std::string trace_id;  // empty: the daemon picks one
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
