#ifndef GPUCTL_CLI_PS_COMMAND_H_
#define GPUCTL_CLI_PS_COMMAND_H_

#include <vector>

#include "absl/time/time.h"
#include "cli/command_env.h"
#include "cli/host_list.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::cli {

struct PsOptions {
  std::vector<HostSpec> hosts;
  // No criterion: every attached process.
  v1::ProcessSelector selector;
  size_t parallel = 64;
  absl::Duration host_timeout = absl::Seconds(10);
  bool json = false;
  // Also the attachments each daemon refused lately (ListProcesses
  // include_rejected).
  bool include_rejected = false;
  // COMMAND uncut.
  bool wide = false;
};

// `gpuctl ps`: ListProcesses on every host (concurrently, at most
// `parallel` at once), one table of HOST, PID, RANK, ROLE, STEP, JOB,
// STATE, LABELS, COMMAND, and with include_rejected a second one of HOST,
// PID, UID, TIME, JOB, REASON (or one JSON document). Returns an exit code:
// 0 every host answered; 1 some did not; 4 none did; 130 interrupted.
int RunPs(const PsOptions& options, const CliEnv& env);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_PS_COMMAND_H_
