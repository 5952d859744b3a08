// What the library tells the daemon about its process (the Hello message).
#ifndef GPUCTL_CLIENT_LIB_SRC_PROCESS_IDENTITY_H_
#define GPUCTL_CLIENT_LIB_SRC_PROCESS_IDENTITY_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
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

// The first of `names` whose value parses as a rank; -1 when none does.
int32_t FirstRankValue(const EnvLookup& env, std::initializer_list<const char*> names);

// Up to `limit` bytes of the file at `path`; "" when it cannot be read.
std::string ReadSmallFile(const std::string& path, size_t limit);

// Splits /proc/<pid>/cmdline content (NUL-separated) into arguments,
// keeping at most `max_total_bytes` of argument text.
std::vector<std::string> SplitCmdline(std::string_view raw, size_t max_total_bytes);

// Builds the Hello for the calling process: protocol version, library
// version, pid/ppid, job id (GPUCTL_JOB_ID, else SLURM_JOB_ID, else
// TORCHELASTIC_RUN_ID), ranks (RANK, LOCAL_RANK, WORLD_SIZE, falling back
// to Open MPI's OMPI_COMM_WORLD_*, then PMI_RANK/PMI_SIZE, then Slurm's
// SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS), hostname, labels (labels.h),
// command line read from `proc_root`/self/cmdline, and capabilities.
// step_counter and CAPABILITY_STEP_COUNTER are the agent's to set: they
// depend on the descriptor it sends along.
wire::Hello BuildHello(const EnvLookup& env, const std::string& proc_root);

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_PROCESS_IDENTITY_H_
