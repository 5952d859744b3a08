#ifndef GPUCTL_CLI_CLI_H_
#define GPUCTL_CLI_CLI_H_

#include <string>
#include <vector>

#include "cli/command_env.h"

namespace gpuctl::cli {

// Parses `args` (without the program name), runs the command and returns the
// process exit code (cli/exit_codes.h). Usage errors are reported on
// env.err with kExitUsage before anything is sent.
int RunCli(const std::vector<std::string>& args, const CliEnv& env);

// The `gpuctl` executable: builds a CliEnv from the real process (stdout,
// stderr, $GPUCTL_HOST, the terminal, SIGINT/SIGTERM) and calls RunCli.
int Main(int argc, char** argv);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_CLI_H_
