#ifndef GPUCTL_CLI_DOCTOR_COMMAND_H_
#define GPUCTL_CLI_DOCTOR_COMMAND_H_

#include <string>

#include "cli/command_env.h"

namespace gpuctl::cli {

struct DoctorOptions {
  int pid = 0;
  // gpuctld's gRPC target, normalized (NormalizeHost).
  std::string target;
  // --socket: the daemon's IPC socket as this host names it; instead of the
  // path gpuctld reports (its own, inside a container).
  std::string socket;
  bool json = false;
  // Where the processes are; "/proc" outside tests.
  std::string proc_root = "/proc";
  // The library path shown in a fix; empty: found next to gpuctl itself.
  std::string library_hint;
};

// `gpuctl doctor --pid N`: why a process of this host is or is not attached
// (cli/doctor_inspect.h). Exit codes: 0 attached, 1 not attached (the
// verdict says why), 3 no such process (or a zombie), 4 when only gpuctld's
// answer could have told and it was not reachable.
int RunDoctor(const DoctorOptions& options, const CliEnv& env);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_DOCTOR_COMMAND_H_
