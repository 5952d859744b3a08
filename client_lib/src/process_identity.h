// What the library tells the daemon about its process (the Hello message).
#ifndef GPUCTL_CLIENT_LIB_SRC_PROCESS_IDENTITY_H_
#define GPUCTL_CLIENT_LIB_SRC_PROCESS_IDENTITY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client_lib/src/wire/ipc_messages.h"

namespace gpuctl::client {

// Returns the value of an environment variable, or nullopt.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// The real environment (getenv).
EnvLookup ProcessEnv();

// Parses a decimal int32 (rank, world size); -1 when absent or malformed.
int32_t ParseRankValue(const std::optional<std::string>& value);

// Splits /proc/<pid>/cmdline content (NUL-separated) into arguments,
// keeping at most `max_total_bytes` of argument text.
std::vector<std::string> SplitCmdline(std::string_view raw, size_t max_total_bytes);

// Builds the Hello for the calling process: protocol version, library
// version, pid/ppid, job id (GPUCTL_JOB_ID, else SLURM_JOB_ID, else
// TORCHELASTIC_RUN_ID), RANK/LOCAL_RANK/WORLD_SIZE, hostname, command line
// read from `proc_root`/self/cmdline, and capabilities.
wire::Hello BuildHello(const EnvLookup& env, const std::string& proc_root);

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_PROCESS_IDENTITY_H_
