#ifndef GPUCTL_CLI_ANALYZE_COMMAND_H_
#define GPUCTL_CLI_ANALYZE_COMMAND_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/command_env.h"
#include "cli/host_list.h"
#include "daemon/analysis/analyze.h"
#include "daemon/analysis/finding.h"
#include "daemon/analysis/report.h"
#include "daemon/common/posix_file.h"
#include "daemon/merge/merge.h"
#include "gpuctl/v1/manifest.pb.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace gpuctl::cli {

// `gpuctl analyze` flags as typed.
struct AnalyzeFlags {
  std::vector<std::string> paths;
  bool json = false;
  std::string html;
  std::string small_kernel_us, small_kernel_pct, min_kernels, launch_gap_us, min_pct,
      exposed_comm_pct, link_gbps, copy_bandwidth_pct, jobs;
  std::string memory_peak_pct;
  std::string straggler_mad, straggler_pct, comm_wait_pct, occupancy_pct, launch_queue_depth;
  // Fetched from the daemons instead of local paths.
  std::string trace_id, since, job_id, trigger, max_traces, keep;
  bool bucket = false;
  HostFlags hosts;
  std::string parallel = "64", host_timeout = "10s";
  // --diff A B.
  std::vector<std::string> diff;
  std::string top;
  // --merge OUT, --merge-format auto|json|proto.
  std::string merge, merge_format;
  // Which were given, for the rules between flags.
  std::vector<const CLI::Option*> host_options;
  const CLI::Option* since_option = nullptr;
  const CLI::Option* job_option = nullptr;
  const CLI::Option* trace_id_option = nullptr;
  const CLI::Option* trigger_option = nullptr;
  const CLI::Option* max_traces_option = nullptr;
  const CLI::Option* keep_option = nullptr;
  const CLI::Option* bucket_option = nullptr;
  const CLI::Option* diff_option = nullptr;
  const CLI::Option* top_option = nullptr;
  const CLI::Option* merge_option = nullptr;
  const CLI::Option* merge_format_option = nullptr;
};

// Where `gpuctl analyze` takes its traces from.
enum class AnalyzeSource {
  kPaths,    // FILE...|DIR
  kTraceId,  // --trace-id ID: one trace, fetched from every host that has it
  kJob,      // --since D --job J: a job's stored traces, fetched
  kDiff,     // --diff A B
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

  AnalyzeSource source = AnalyzeSource::kPaths;
  // kTraceId and kJob: the daemons, as the host flags name them.
  std::vector<HostSpec> hosts;
  size_t parallel = 64;
  absl::Duration host_timeout = absl::Seconds(10);
  std::string trace_id;
  // kJob: traces of `job_id` created in the last `since`, of `trigger` when
  // set, at most `max_traces` of them (the newest).
  std::string job_id;
  absl::Duration since;
  v1::TriggerKind trigger = v1::TRIGGER_KIND_UNSPECIFIED;
  size_t max_traces = 20;
  // kTraceId and kJob: from the daemons' S3 bucket (every host's part of a
  // trace from one daemon, pods that are gone included) rather than their
  // own stores.
  bool bucket = false;
  // Where fetched traces are kept; empty: a temporary directory, removed
  // after.
  std::string keep_dir;
  // kDiff: the two sides, each a file, a directory or "trace:ID"; the
  // kernels listed.
  std::vector<std::string> diff;
  size_t top = 10;
  // Fetched into a temporary directory: the reports name files relative to
  // it (they are gone when the command returns); empty: as read.
  std::string display_root;
  // --merge: the inputs merged into one trace at this path
  // (cli/analyze_merge.h) instead of analysed; empty: analysed.
  std::string merge_path;
  merge::MergeFormat merge_format = merge::MergeFormat::kAuto;

  bool Fetches() const {
    return source == AnalyzeSource::kTraceId || source == AnalyzeSource::kJob ||
           (source == AnalyzeSource::kDiff &&
            (diff[0].rfind("trace:", 0) == 0 || diff[1].rfind("trace:", 0) == 0));
  }
};

// The reports of some trace files, and the files that could not be read.
struct AnalyzedFiles {
  std::vector<analysis::TraceReport> reports;
  std::vector<analysis::TraceError> errors;
};

// Reads and analyses `files`, options.jobs at a time, then compares the
// ranks of each trace among them (analysis::AnalyzeRanks); every error is
// also printed to env.err.
AnalyzedFiles AnalyzeFiles(const std::vector<std::string>& files,
                           const AnalyzeCommandOptions& options, const CliEnv& env);

void AddAnalyzeFlags(CLI::App* cmd, AnalyzeFlags& flags);
// INVALID_ARGUMENT naming the flag for a value out of range, an --html
// path that cannot be a file (a directory, or in a directory that does not
// exist), or flags that do not go together: more than one input (FILE...,
// --trace-id, --since/--job, --diff) or none, --since without --job, host
// flags without a fetching input. `env_host` is $GPUCTL_HOST.
absl::StatusOr<AnalyzeCommandOptions> ValidateAnalyzeFlags(const AnalyzeFlags& flags,
                                                           absl::string_view env_host = "");

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
// --trace-id and --since/--job (analyze_remote.cc) fetch first and then
// do the same; --diff compares two inputs (docs/analyze.md). A host that
// fails is named with its error; the exit code is then the worst of
// kExitPartialFailure (some host failed, others delivered),
// kExitNothingMatched (no host has the trace, or no trace matched) and
// kExitDaemonError (no host could be asked).
int RunAnalyze(const AnalyzeCommandOptions& options, const CliEnv& env);

// The report on `paths` (files and directories) as RunAnalyze gives it for
// FILE...|DIR, with the same exit codes.
int AnalyzePaths(const std::vector<std::string>& paths, const AnalyzeCommandOptions& options,
                 const CliEnv& env);

// The --html file at `path`, created now (as a temporary in its directory)
// so that a path that cannot be written fails before any trace is read; it
// appears whole at Commit or not at all.
absl::StatusOr<std::unique_ptr<AtomicFile>> CreateHtmlReportFile(const std::string& path);

// The fetching inputs (analyze_remote.cc).
int RunAnalyzeTraceId(const AnalyzeCommandOptions& options, const CliEnv& env);
int RunAnalyzeJob(const AnalyzeCommandOptions& options, const CliEnv& env);
int RunAnalyzeDiff(const AnalyzeCommandOptions& options, const CliEnv& env);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_ANALYZE_COMMAND_H_
