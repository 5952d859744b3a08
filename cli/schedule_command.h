#ifndef GPUCTL_CLI_SCHEDULE_COMMAND_H_
#define GPUCTL_CLI_SCHEDULE_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli/command_env.h"
#include "cli/host_list.h"

namespace gpuctl::cli {

struct ScheduleCommandOptions {
  std::vector<HostSpec> hosts;
  size_t parallel = 64;
  absl::Duration host_timeout = absl::Seconds(10);
  bool json = false;
  // Upcoming slots shown per rule.
  uint32_t next_slots = 3;
  // --preview --job ID --hours N: the slots that would capture the job.
  std::string preview_job;
  absl::Duration preview_duration = absl::Hours(24);
};

// `gpuctl schedule`: GetSchedule on every host (concurrently, at most
// `parallel` at once). Without a preview: per host, the rules with their
// duty cycle and next slots, today's budget use, and the last captures and
// skips with their reasons. With one: the job's drawn slots as the first
// host that answered computes them, and the hosts whose answer differs
// (another schedule: their fingerprints are named). Either way hosts whose
// schedule fingerprints differ are named on stderr. One JSON document
// with --json. Exit codes as `ps`: 0 every host answered; 1 some did not
// (or answered a different preview); 4 none did; 130 interrupted.
int RunSchedule(const ScheduleCommandOptions& options, const CliEnv& env);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_SCHEDULE_COMMAND_H_
