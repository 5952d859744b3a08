#include "cli/analyze_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/analyze_merge.h"
#include "cli/bounded_parallel.h"
#include "cli/duration.h"
#include "cli/exit_codes.h"
#include "cli/flag_number.h"
#include "cli/list_commands.h"
#include "daemon/analysis/analyze.h"
#include "daemon/analysis/report.h"
#include "daemon/analysis/trace_reader.h"
#include "daemon/common/posix_file.h"
#include "daemon/common/trace_id.h"
#include "daemon/merge/trace_manifests.h"
#include "google/protobuf/util/time_util.h"

namespace gpuctl::cli {
namespace {

namespace fs = std::filesystem;

// A non-negative decimal number (fractions allowed) from `min` to `max`.
absl::StatusOr<double> ParseFlagDecimal(absl::string_view flag, const std::string& text,
                                        absl::string_view what, double min, double max) {
  double v = 0;
  bool digits = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= '0' && c <= '9') || c == '.';
  });
  if (!digits || !absl::SimpleAtod(text, &v) || !std::isfinite(v) || v < min || v > max) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": expected ", what, " from ", min, " to ",
                                                   max, ", got \"", text, "\""));
  }
  return v;
}

// The --html path as a file to write: not a directory, in one that exists.
absl::Status CheckHtmlPath(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("--html: expected a file path");
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--html: ", path, " is a directory; give the report's file name"));
  }
  const std::string dir = ParentDir(path);
  if (!fs::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--html: cannot write ", path, ": ", dir, " is not a directory"));
  }
  return absl::OkStatus();
}

// The --html file, created before any trace is read so that a path that
// cannot be written fails at once; it appears whole at Commit or not at all.
absl::StatusOr<std::unique_ptr<AtomicFile>> CreateHtmlFile(const std::string& path) {
  const std::string temp = absl::StrCat(ParentDir(path), "/.gpuctl-analyze-html.XXXXXX");
  return AtomicFile::Create(path, temp, 0644);
}

bool IsTraceFileName(const std::string& name) {
  if (name == "manifest.json" || name.empty() || name[0] == '.') return false;
  return absl::EndsWith(name, ".json") || absl::EndsWith(name, ".json.gz");
}

bool AnalyzeFlagGiven(const CLI::Option* option) {
  return option != nullptr && option->count() > 0;
}

// What the fetching inputs need: the hosts, --parallel, --host-timeout,
// --keep.
absl::Status ValidateFetch(const AnalyzeFlags& f, absl::string_view env_host,
                           AnalyzeCommandOptions& out) {
  absl::StatusOr<std::vector<HostSpec>> hosts = ParseHostFlags(f.hosts, env_host);
  if (!hosts.ok()) return hosts.status();
  out.hosts = *std::move(hosts);
  absl::StatusOr<uint64_t> parallel =
      ParseFlagNumber("--parallel", f.parallel, "a number of hosts to fetch from at once", 1, 1024);
  if (!parallel.ok()) return parallel.status();
  out.parallel = static_cast<size_t>(*parallel);
  absl::StatusOr<absl::Duration> timeout = ParseUserDuration(f.host_timeout);
  if (!timeout.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--host-timeout: ", timeout.status().message()));
  }
  out.host_timeout = *timeout;
  if (AnalyzeFlagGiven(f.keep_option)) {
    std::error_code ec;
    if (f.keep.empty()) return absl::InvalidArgumentError("--keep: expected a directory");
    if (fs::exists(f.keep, ec) && !fs::is_directory(f.keep, ec)) {
      return absl::InvalidArgumentError(absl::StrCat("--keep: ", f.keep, " is not a directory"));
    }
    out.keep_dir = f.keep;
  }
  return absl::OkStatus();
}

absl::Status ValidateJobFlags(const AnalyzeFlags& f, AnalyzeCommandOptions& out) {
  if (!AnalyzeFlagGiven(f.job_option)) return absl::InvalidArgumentError("--since needs --job JOB");
  if (!AnalyzeFlagGiven(f.since_option))
    return absl::InvalidArgumentError("--job needs --since DURATION");
  if (f.job_id.empty()) return absl::InvalidArgumentError("--job: expected a job id");
  out.job_id = f.job_id;
  absl::StatusOr<absl::Duration> since = ParseLookback(f.since);
  if (!since.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--since: ", since.status().message()));
  }
  out.since = *since;
  if (AnalyzeFlagGiven(f.trigger_option)) {
    absl::StatusOr<v1::TriggerKind> trigger = ParseTriggerKind(f.trigger);
    if (!trigger.ok()) return trigger.status();
    out.trigger = *trigger;
  }
  if (AnalyzeFlagGiven(f.max_traces_option)) {
    absl::StatusOr<uint64_t> n =
        ParseFlagNumber("--max-traces", f.max_traces, "a number of traces", 1, 1000);
    if (!n.ok()) return n.status();
    out.max_traces = static_cast<size_t>(*n);
  }
  return absl::OkStatus();
}

// --diff A B: each side a path or trace:ID; --top.
absl::Status ValidateDiffFlags(const AnalyzeFlags& f, AnalyzeCommandOptions& out) {
  if (f.diff.size() != 2) {
    return absl::InvalidArgumentError("--diff: expected two inputs, before and after");
  }
  for (const std::string& side : f.diff) {
    if (side.empty()) return absl::InvalidArgumentError("--diff: an input is empty");
    if (side.rfind("trace:", 0) == 0 && !IsValidTraceId(side.substr(6))) {
      return absl::InvalidArgumentError(
          absl::StrCat("--diff: \"", side.substr(0, 70),
                       "\" is not trace:ID with a lowercase UUIDv7 ID like "
                       "0190c3a2-7b1e-7c4d-9a2b-3c4d5e6f7a8b"));
    }
  }
  out.diff = f.diff;
  if (AnalyzeFlagGiven(f.top_option)) {
    absl::StatusOr<uint64_t> n = ParseFlagNumber("--top", f.top, "a number of kernels", 1, 1000);
    if (!n.ok()) return n.status();
    out.top = static_cast<size_t>(*n);
  }
  return absl::OkStatus();
}

// Exactly one input: FILE..., --trace-id, --since/--job or --diff; the
// flags of one input only with it.
absl::Status ValidateSource(const AnalyzeFlags& f, absl::string_view env_host,
                            AnalyzeCommandOptions& out) {
  std::vector<std::pair<AnalyzeSource, std::string>> inputs;
  if (!f.paths.empty()) inputs.emplace_back(AnalyzeSource::kPaths, "trace files or directories");
  if (AnalyzeFlagGiven(f.trace_id_option))
    inputs.emplace_back(AnalyzeSource::kTraceId, "--trace-id");
  if (AnalyzeFlagGiven(f.since_option) || AnalyzeFlagGiven(f.job_option)) {
    inputs.emplace_back(AnalyzeSource::kJob, "--since/--job");
  }
  if (AnalyzeFlagGiven(f.diff_option)) inputs.emplace_back(AnalyzeSource::kDiff, "--diff");
  if (inputs.empty()) {
    return absl::InvalidArgumentError(
        "nothing to analyze: give trace files or directories, --trace-id ID, --since DURATION "
        "--job JOB, or --diff A B");
  }
  if (inputs.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(inputs[0].second, " and ", inputs[1].second, " are two inputs; give one"));
  }
  out.source = inputs[0].first;
  if (out.source != AnalyzeSource::kJob) {
    for (const CLI::Option* option : {f.trigger_option, f.max_traces_option}) {
      if (AnalyzeFlagGiven(option)) {
        return absl::InvalidArgumentError(
            absl::StrCat(option->get_name(), " goes with --since and --job"));
      }
    }
  }
  if (out.source == AnalyzeSource::kTraceId) {
    if (!IsValidTraceId(f.trace_id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--trace-id: \"", f.trace_id.substr(0, 64),
                       "\" is not a lowercase UUIDv7 like 0190c3a2-7b1e-7c4d-9a2b-3c4d5e6f7a8b"));
    }
    out.trace_id = f.trace_id;
  }
  if (out.source == AnalyzeSource::kJob) {
    if (absl::Status s = ValidateJobFlags(f, out); !s.ok()) return s;
  }
  if (AnalyzeFlagGiven(f.bucket_option)) {
    if (out.source != AnalyzeSource::kTraceId && out.source != AnalyzeSource::kJob) {
      return absl::InvalidArgumentError("--bucket goes with --trace-id or --since and --job");
    }
    out.bucket = true;
  }
  if (out.source == AnalyzeSource::kDiff) {
    if (absl::Status s = ValidateDiffFlags(f, out); !s.ok()) return s;
  } else if (AnalyzeFlagGiven(f.top_option)) {
    return absl::InvalidArgumentError("--top goes with --diff");
  }
  if (!f.html.empty() && out.source == AnalyzeSource::kJob) {
    return absl::InvalidArgumentError(
        "--html goes with trace files, directories, --trace-id or --diff (not --since)");
  }
  if (out.Fetches()) return ValidateFetch(f, env_host, out);
  for (const CLI::Option* option : f.host_options) {
    if (AnalyzeFlagGiven(option)) {
      return absl::InvalidArgumentError(absl::StrCat(
          option->get_name(), " applies to traces fetched from gpuctld (--trace-id, --since)"));
    }
  }
  if (AnalyzeFlagGiven(f.keep_option)) {
    return absl::InvalidArgumentError(
        "--keep applies to traces fetched from gpuctld (--trace-id, --since)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<AtomicFile>> CreateHtmlReportFile(const std::string& path) {
  return CreateHtmlFile(path);
}

void AddAnalyzeFlags(CLI::App* cmd, AnalyzeFlags& f) {
  cmd->add_option("traces", f.paths, "Trace files (.json, .json.gz) or trace directories");
  f.trace_id_option = cmd->add_option(
      "--trace-id", f.trace_id, "Fetch this stored trace from every host that has it (--host)");
  f.since_option = cmd->add_option("--since", f.since,
                                   "With --job: fetch the job's traces stored this far back "
                                   "(e.g. 6h or 7d, at most 366d)");
  f.job_option = cmd->add_option("--job", f.job_id, "With --since: the job whose traces to fetch");
  f.trigger_option =
      cmd->add_option("--trigger", f.trigger,
                      "With --since: only traces of this trigger: scheduled, anomaly or on-demand");
  f.max_traces_option = cmd->add_option(
      "--max-traces", f.max_traces, "With --since: fetch at most the newest N traces (default 20)");
  f.bucket_option = cmd->add_flag(
      "--bucket", f.bucket,
      "With --trace-id or --since: from the daemons' S3 bucket, every host's part of a trace "
      "(pods gone included)");
  f.keep_option = cmd->add_option(
      "--keep", f.keep,
      "Keep the fetched traces in this directory (default: a temporary one, removed after)");
  f.diff_option = cmd->add_option("--diff", f.diff,
                                  "Compare two inputs, before and after: each a trace file, a "
                                  "trace directory or trace:ID (fetched, --host)")
                      ->expected(2)
                      ->allow_extra_args(false);
  f.top_option =
      cmd->add_option("--top", f.top, "With --diff: kernels listed per change kind (default 10)");
  f.host_options = {
      cmd->add_option("--host", f.hosts.hosts,
                      "gpuctld address HOST[:PORT], repeatable (default $GPUCTL_HOST, else "
                      "127.0.0.1:7070)")
          ->allow_extra_args(false)
          ->delimiter(','),
      cmd->add_option("--hosts-file", f.hosts.hosts_files,
                      "File of gpuctld addresses, one per line, # comments (repeatable)")
          ->allow_extra_args(false),
      cmd->add_option("--hosts", f.hosts.dns,
                      "dns:NAME[:PORT]: every address NAME resolves to (repeatable)")
          ->allow_extra_args(false),
      cmd->add_option("--parallel", f.parallel, "Hosts fetched from at once")
          ->capture_default_str(),
      cmd->add_option("--host-timeout", f.host_timeout, "Per host: connect within this")
          ->capture_default_str(),
  };
  f.merge_option = cmd->add_option(
      "--merge", f.merge,
      "Write every rank into this one trace file for Perfetto instead of analysing (.json, "
      ".json.gz or .pftrace), hosts' clocks aligned");
  f.merge_format_option = cmd->add_option(
      "--merge-format", f.merge_format,
      "With --merge: auto (JSON up to 1M events / 256 MiB, else protobuf), json or proto");
  cmd->add_flag("--json", f.json, "Print one machine-readable JSON document (docs/analyze.md)");
  cmd->add_option("--html", f.html,
                  "Also write a self-contained HTML report (charts, tables, findings) to this "
                  "file")
      ->check([](const std::string& path) {
        return path.empty() ? std::string("expected a file path") : std::string();
      });
  cmd->add_option("--small-kernel-us", f.small_kernel_us,
                  "A kernel shorter than this is small (default 10)");
  cmd->add_option("--small-kernel-pct", f.small_kernel_pct,
                  "Launch-bound when at least this % of kernels are small (default 50)");
  cmd->add_option("--min-kernels", f.min_kernels,
                  "Launch-bound needs at least this many kernels (default 100)");
  cmd->add_option("--launch-gap-us", f.launch_gap_us,
                  "A gap after an already issued launch up to this long is launch overhead "
                  "(default 20)");
  cmd->add_option("--min-pct", f.min_pct,
                  "Report no finding under this % of its process's GPU span (default 1)");
  cmd->add_option("--exposed-comm-pct", f.exposed_comm_pct,
                  "Report NCCL time not overlapped by compute above this % of the span "
                  "(default 20)");
  cmd->add_option("--link-gbps", f.link_gbps,
                  "Host-device link bandwidth in GB/s, to judge copies (default: not judged)");
  cmd->add_option("--copy-bandwidth-pct", f.copy_bandwidth_pct,
                  "With --link-gbps: copies under this % of the link are slow (default 50)");
  cmd->add_option("--memory-peak-pct", f.memory_peak_pct,
                  "Report a device whose allocated memory peaks at this % of its size (default "
                  "90)");
  cmd->add_option("--straggler-mad", f.straggler_mad,
                  "A rank is a straggler beyond the ranks' median by this many median absolute "
                  "deviations (default 3)");
  cmd->add_option("--straggler-pct", f.straggler_pct,
                  "... and by at least this % of the ranks' median step time (default 5)");
  cmd->add_option("--comm-wait-pct", f.comm_wait_pct,
                  "Report NCCL time waiting for other ranks above this % of it (default 25)");
  cmd->add_option("--occupancy-pct", f.occupancy_pct,
                  "Report compute kernels under this % estimated occupancy (default 25)");
  cmd->add_option("--launch-queue-depth", f.launch_queue_depth,
                  "Report a stream with this many launched, unfinished ops (default 1000 of "
                  "CUDA's 1024)");
  cmd->add_option("--jobs", f.jobs,
                  "Files read at once (default: the CPUs, at most 8); memory grows with it");
}

absl::StatusOr<AnalyzeCommandOptions> ValidateAnalyzeFlags(const AnalyzeFlags& f,
                                                           absl::string_view env_host) {
  AnalyzeCommandOptions out;
  out.paths = f.paths;
  out.json = f.json;
  if (absl::Status s = ValidateSource(f, env_host, out); !s.ok()) return s;
  if (absl::Status s = ValidateMergeFlags(f, out); !s.ok()) return s;
  if (!f.html.empty()) {
    if (absl::Status s = CheckHtmlPath(f.html); !s.ok()) return s;
    out.html_path = f.html;
  }
  analysis::AnalyzeOptions& t = out.thresholds;
  auto decimal = [](absl::string_view flag, const std::string& text, absl::string_view what,
                    double min, double max, double* field, double scale) -> absl::Status {
    if (text.empty()) return absl::OkStatus();
    absl::StatusOr<double> v = ParseFlagDecimal(flag, text, what, min, max);
    if (!v.ok()) return v.status();
    *field = *v * scale;
    return absl::OkStatus();
  };
  double small_us = static_cast<double>(t.small_kernel_ns) / 1000;
  double gap_us = static_cast<double>(t.launch_gap_ns) / 1000;
  for (absl::Status s : {
           decimal("--small-kernel-us", f.small_kernel_us, "microseconds", 0.001, 1e6, &small_us,
                   1),
           decimal("--small-kernel-pct", f.small_kernel_pct, "a percentage", 0, 100,
                   &t.small_kernel_share, 0.01),
           decimal("--launch-gap-us", f.launch_gap_us, "microseconds", 0, 1e6, &gap_us, 1),
           decimal("--min-pct", f.min_pct, "a percentage", 0, 100, &t.min_share, 0.01),
           decimal("--exposed-comm-pct", f.exposed_comm_pct, "a percentage", 0, 100,
                   &t.exposed_comm_share, 0.01),
           decimal("--link-gbps", f.link_gbps, "GB/s", 0, 1e5, &t.link_gbps, 1),
           decimal("--copy-bandwidth-pct", f.copy_bandwidth_pct, "a percentage", 0, 100,
                   &t.copy_bandwidth_share, 0.01),
           decimal("--memory-peak-pct", f.memory_peak_pct, "a percentage", 0, 100,
                   &t.memory_peak_share, 0.01),
           decimal("--straggler-mad", f.straggler_mad, "a number of deviations", 0, 1000,
                   &t.straggler_mad, 1),
           decimal("--straggler-pct", f.straggler_pct, "a percentage", 0, 1000, &t.straggler_share,
                   0.01),
           decimal("--comm-wait-pct", f.comm_wait_pct, "a percentage", 0, 100, &t.comm_wait_share,
                   0.01),
           decimal("--occupancy-pct", f.occupancy_pct, "a percentage", 0.1, 100, &t.occupancy_share,
                   0.01),
       }) {
    if (!s.ok()) return s;
  }
  t.small_kernel_ns = std::llround(small_us * 1000);
  t.launch_gap_ns = std::llround(gap_us * 1000);
  out.jobs = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
  if (!f.jobs.empty()) {
    absl::StatusOr<uint64_t> n = ParseFlagNumber("--jobs", f.jobs, "a number of files", 1, 256);
    if (!n.ok()) return n.status();
    out.jobs = static_cast<size_t>(*n);
  }
  if (!f.launch_queue_depth.empty()) {
    absl::StatusOr<uint64_t> n = ParseFlagNumber("--launch-queue-depth", f.launch_queue_depth,
                                                 "a number of queued ops", 1, 1'000'000);
    if (!n.ok()) return n.status();
    t.launch_queue_limit = static_cast<int64_t>(*n);
  }
  if (!f.min_kernels.empty()) {
    absl::StatusOr<uint64_t> n =
        ParseFlagNumber("--min-kernels", f.min_kernels, "a number of kernels", 0, 1'000'000'000);
    if (!n.ok()) return n.status();
    t.min_kernels = *n;
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ExpandTracePaths(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (ec || !fs::exists(st)) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    if (!fs::is_directory(st)) {
      files.push_back(path);
      continue;
    }
    std::vector<std::string> found;
    for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
      std::error_code type_ec;
      if (entry.is_regular_file(type_ec) && IsTraceFileName(entry.path().filename().string())) {
        found.push_back(entry.path().string());
      }
    }
    if (ec) return absl::NotFoundError(absl::StrCat(path, ": ", ec.message()));
    if (found.empty()) {
      return absl::NotFoundError(
          absl::StrCat(path, ": no trace files (*.json, *.json.gz) at its top level"));
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

// What a manifest says of one process's capture (ProcessResult).
struct CaptureNote {
  bool late_start = false, joined_late = false;
  int64_t start_skew_ns = 0;
};

std::string NormalPath(const fs::path& path) { return path.lexically_normal().string(); }

// The capture notes of `files` from the manifests of their directories
// (docs/trace-format.md), by the file's normalised path. A manifest that
// cannot be read is said on stderr; its files go without notes.
std::map<std::string, CaptureNote> ReadCaptureNotes(const std::vector<std::string>& files,
                                                    const CliEnv& env) {
  std::set<std::string> dirs;
  for (const std::string& file : files) {
    const fs::path parent = fs::path(file).parent_path();
    dirs.insert(parent.empty() ? "." : parent.string());
  }
  std::map<std::string, CaptureNote> notes;
  for (const std::string& dir : dirs) {
    const merge::TraceManifests read = merge::ReadTraceManifests(dir);
    for (const std::string& why : read.unreadable) {
      *env.err << "gpuctl analyze: " << why << "; its processes' capture notes are not used\n";
    }
    for (const merge::TraceManifestFile& manifest : read.manifests) {
      for (const v1::ProcessResult& result : manifest.manifest.results()) {
        if (result.file().empty()) continue;
        const CaptureNote note{
            result.late_start(), result.joined_late(),
            google::protobuf::util::TimeUtil::DurationToNanoseconds(result.start_skew())};
        notes.emplace(NormalPath(fs::path(dir) / result.file()), note);
      }
    }
  }
  return notes;
}

AnalyzedFiles AnalyzeFiles(const std::vector<std::string>& files,
                           const AnalyzeCommandOptions& options, const CliEnv& env) {
  const std::map<std::string, CaptureNote> notes = ReadCaptureNotes(files, env);
  // One model per worker at a time; each is dropped once analysed.
  std::vector<std::optional<absl::StatusOr<analysis::TraceReport>>> results(files.size());
  RunBounded(files.size(), options.jobs, [&](size_t i) {
    absl::StatusOr<analysis::TraceModel> model = analysis::ReadTraceFile(files[i]);
    if (!model.ok()) {
      results[i] = model.status();
      return;
    }
    if (auto note = notes.find(NormalPath(files[i])); note != notes.end()) {
      analysis::TraceInfo& info = model->info;
      info.has_manifest = true;
      info.late_start = note->second.late_start;
      info.joined_late = note->second.joined_late;
      info.start_skew_ns = note->second.start_skew_ns;
    }
    results[i] = analysis::AnalyzeModel(*model, options.thresholds);
  });
  const std::string root =
      options.display_root.empty() ? "" : absl::StrCat(options.display_root, "/");
  auto shown = [&root](const std::string& path) {
    return !root.empty() && absl::StartsWith(path, root) ? path.substr(root.size()) : path;
  };
  AnalyzedFiles out;
  for (size_t i = 0; i < files.size(); ++i) {
    absl::StatusOr<analysis::TraceReport>& result = *results[i];
    if (result.ok()) {
      result->info.path = shown(result->info.path);
      for (analysis::Finding& f : result->findings) f.trace = shown(f.trace);
    }
    if (!result.ok()) {
      out.errors.push_back({shown(files[i]), std::string(result.status().message())});
      *env.err << "gpuctl analyze: " << result.status().message() << "\n";
      continue;
    }
    out.reports.push_back(*std::move(result));
  }
  // The ranks of one trace are compared once all are read (diagnosis 7).
  analysis::AnalyzeRanks(out.reports, options.thresholds);
  return out;
}

int RunAnalyze(const AnalyzeCommandOptions& options, const CliEnv& env) {
  switch (options.source) {
    case AnalyzeSource::kTraceId:
      return RunAnalyzeTraceId(options, env);
    case AnalyzeSource::kJob:
      return RunAnalyzeJob(options, env);
    case AnalyzeSource::kDiff:
      return RunAnalyzeDiff(options, env);
    case AnalyzeSource::kPaths:
      break;
  }
  return AnalyzePaths(options.paths, options, env);
}

int AnalyzePaths(const std::vector<std::string>& paths, const AnalyzeCommandOptions& options,
                 const CliEnv& env) {
  if (!options.merge_path.empty()) return MergePaths(paths, options, env);
  absl::StatusOr<std::vector<std::string>> files = ExpandTracePaths(paths);
  if (!files.ok()) {
    *env.err << "gpuctl analyze: " << files.status().message() << "\n";
    return kExitNothingMatched;
  }
  std::unique_ptr<AtomicFile> html;
  if (!options.html_path.empty()) {
    absl::StatusOr<std::unique_ptr<AtomicFile>> created = CreateHtmlFile(options.html_path);
    if (!created.ok()) {
      *env.err << "gpuctl analyze: --html: " << created.status().message() << "\n";
      return kExitUsage;
    }
    html = *std::move(created);
  }
  AnalyzedFiles analyzed = AnalyzeFiles(*files, options, env);
  const std::vector<analysis::TraceReport>& reports = analyzed.reports;
  const std::vector<analysis::TraceError>& errors = analyzed.errors;
  const std::vector<analysis::Finding> ranked = analysis::RankFindings(reports);
  if (options.json) {
    *env.out << analysis::RenderJson(reports, ranked, errors, options.thresholds);
  } else if (!reports.empty()) {
    *env.out << analysis::RenderText(reports, ranked, 100);
  }
  if (html != nullptr) {
    absl::Status written =
        html->Append(analysis::RenderHtml(reports, ranked, errors, options.thresholds));
    if (written.ok()) written = html->Commit();
    if (!written.ok()) {
      *env.err << "gpuctl analyze: --html: " << written.message() << "\n";
      return kExitPartialFailure;
    }
    if (!options.json) *env.out << "\nHTML report: " << options.html_path << "\n";
  }
  return errors.empty() ? kExitOk : kExitPartialFailure;
}

}  // namespace gpuctl::cli
