#ifndef GPUCTL_CLI_ANALYZE_MERGE_H_
#define GPUCTL_CLI_ANALYZE_MERGE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/analyze_command.h"
#include "cli/command_env.h"

namespace gpuctl::cli {

// --merge OUT and --merge-format: with trace files, a directory or
// --trace-id only, and without --json and --html (the merge is the
// output). OUT must name a file in an existing directory. INVALID_ARGUMENT
// naming the flag otherwise.
absl::Status ValidateMergeFlags(const AnalyzeFlags& flags, AnalyzeCommandOptions& out);

// `gpuctl analyze --merge OUT`: every trace file `paths` name (as
// ExpandTracePaths expands them) merged into one Perfetto-readable file
// (daemon/merge, docs/analyze.md), then what was written, rank by rank, on
// env.out. Exit codes: 0 written; 1 a file could not be read or OUT not
// written (nothing is written then); 3 a path does not exist or holds no
// trace.
int MergePaths(const std::vector<std::string>& paths, const AnalyzeCommandOptions& options,
               const CliEnv& env);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_ANALYZE_MERGE_H_
