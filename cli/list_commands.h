#ifndef GPUCTL_CLI_LIST_COMMANDS_H_
#define GPUCTL_CLI_LIST_COMMANDS_H_

#include <string>
#include <vector>

#include "cli/command_env.h"

namespace gpuctl::cli {

// The single-host commands. Each returns an exit code (cli/exit_codes.h);
// `target` is normalized (see NormalizeHost). `ps` is in cli/ps_command.h.

// `gpuctl traces`: stored traces, newest first, following page tokens until
// the end or `limit` traces (0: no limit).
int RunTraces(const std::string& target, const std::string& job_id, int limit, bool json,
              const CliEnv& env);

// `gpuctl status`.
int RunStatus(const std::string& target, bool json, const CliEnv& env);

// `gpuctl get`: downloads `files` (empty: all) of a trace into
// <output_root>/<trace_id>/.
int RunGet(const std::string& target, const std::string& trace_id,
           const std::vector<std::string>& files, const std::string& output_root,
           const CliEnv& env);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_LIST_COMMANDS_H_
