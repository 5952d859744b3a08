#ifndef GPUCTL_CLI_ANALYZE_COMMAND_H_
#define GPUCTL_CLI_ANALYZE_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/command_env.h"
#include "daemon/analysis/finding.h"

namespace CLI {
class App;
}  // namespace CLI

namespace gpuctl::cli {

// `gpuctl analyze` flags as typed.
struct AnalyzeFlags {
  std::vector<std::string> paths;
  bool json = false;
  std::string html;
  std::string small_kernel_us, small_kernel_pct, min_kernels, launch_gap_us, min_pct,
      exposed_comm_pct, link_gbps, copy_bandwidth_pct, jobs;
};

struct AnalyzeCommandOptions {
  std::vector<std::string> paths;  // files and trace directories, as given
  bool json = false;
  // --html: where to write the HTML report (docs/analyze.md), besides the
  // terminal or JSON output; empty: none.
  std::string html_path;
  // Files read at once; each holds one model, so memory grows with this,
  // not with the number of files.
  size_t jobs = 1;
  analysis::AnalyzeOptions thresholds;
};

void AddAnalyzeFlags(CLI::App* cmd, AnalyzeFlags& flags);
// INVALID_ARGUMENT naming the flag for a value out of range, or an --html
// path that cannot be a file: a directory, or in a directory that does not
// exist.
absl::StatusOr<AnalyzeCommandOptions> ValidateAnalyzeFlags(const AnalyzeFlags& flags);

// The trace files `paths` name: a file as is; a directory (a downloaded or
// stored trace, docs/trace-format.md) as its top-level *.json and *.json.gz
// files in name order, without the manifests (`_gpuctl/`, `manifest.json`).
// NOT_FOUND for a path that does not exist or a directory without traces.
absl::StatusOr<std::vector<std::string>> ExpandTracePaths(const std::vector<std::string>& paths);

// `gpuctl analyze FILE...|DIR`: reads every trace as a stream (options.jobs
// at a time), runs the
// diagnoses (docs/analyze.md) and prints the summary and ranked findings,
// or --json, and writes the --html page. Nothing is sent to a daemon. Exit
// codes: 0 every trace was analysed; 1 some could not be read (each error is
// printed, the others are analysed) or the --html page could not be
// written whole; 2 the --html file cannot be created (checked before any
// trace is read); 3 a path does not exist or a directory holds no trace.
int RunAnalyze(const AnalyzeCommandOptions& options, const CliEnv& env);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_ANALYZE_COMMAND_H_
