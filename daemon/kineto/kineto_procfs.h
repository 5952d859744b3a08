#ifndef GPUCTL_DAEMON_KINETO_KINETO_PROCFS_H_
#define GPUCTL_DAEMON_KINETO_KINETO_PROCFS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace gpuctl::daemon::kineto {

// What the bridge learns of a process from the kernel, in the daemon's pid
// namespace.
struct ProcIdentity {
  // /proc/<pid>/stat field 22: with the pid, names one process for its
  // whole life (a reused pid has another).
  uint64_t start_time = 0;
  // The last NSpid entry: the pid the process knows itself by.
  int32_t innermost_pid = 0;
  uid_t uid = 0;  // real uid
};

// The variables the bridge reads from a process's environment.
inline constexpr const char* kIdentityVariables[] = {
    "GPUCTL_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "RANK", "LOCAL_RANK", "WORLD_SIZE"};

// Reads processes for the bridge: Identity on the loop, Environment and
// CommandLine (which wait on the process's memory lock) on the worker, so
// implementations must allow calls from both at once.
class KinetoProcReader {
 public:
  virtual ~KinetoProcReader() = default;
  virtual std::optional<ProcIdentity> Identity(int32_t pid) const = 0;
  // kIdentityVariables found in /proc/<pid>/environ; empty when it cannot
  // be read (another uid without ptrace-read access).
  virtual absl::flat_hash_map<std::string, std::string> Environment(int32_t pid) const = 0;
  virtual std::vector<std::string> CommandLine(int32_t pid) const = 0;
};

class ProcfsKinetoReader final : public KinetoProcReader {
 public:
  explicit ProcfsKinetoReader(std::string proc_root = "/proc") : root_(std::move(proc_root)) {}
  std::optional<ProcIdentity> Identity(int32_t pid) const override;
  absl::flat_hash_map<std::string, std::string> Environment(int32_t pid) const override;
  std::vector<std::string> CommandLine(int32_t pid) const override;

 private:
  std::string root_;
};

// Parses the start time out of a /proc/<pid>/stat line (the command name,
// in parentheses, may hold anything).
std::optional<uint64_t> ParseStatStartTime(const std::string& stat);

}  // namespace gpuctl::daemon::kineto

#endif  // GPUCTL_DAEMON_KINETO_KINETO_PROCFS_H_
