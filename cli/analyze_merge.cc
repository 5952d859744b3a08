#include "cli/analyze_merge.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <ostream>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/exit_codes.h"
#include "daemon/analysis/units.h"
#include "daemon/merge/merge.h"

namespace gpuctl::cli {
namespace {

namespace fs = std::filesystem;

bool MergeFlagGiven(const CLI::Option* option) { return option != nullptr && option->count() > 0; }

std::string FormatName(const merge::MergeResult& r) {
  if (r.format == merge::MergeFormat::kProto) return "Perfetto protobuf";
  return r.gzip ? "Chrome trace JSON, gzip" : "Chrome trace JSON";
}

std::string ClockText(const merge::MergedRank& rank) {
  if (!rank.clock.has_value()) return "own clock";
  const double offset_ms = static_cast<double>(rank.clock->offset_ns) / 1e6;
  if (!rank.clock->measured()) return absl::StrFormat("offset %+.3f ms", offset_ms);
  return absl::StrFormat("offset %+.3f ms +/-%.3f", offset_ms,
                         static_cast<double>(rank.clock->bound_ns()) / 1e6);
}

// How good the alignment is, for the ranks moved by a measured midpoint and
// for those moved by a receipt offset.
void PrintAlignment(std::ostream& out, const std::vector<merge::MergedRank>& ranks) {
  bool measured = false, unmeasured = false;
  for (const merge::MergedRank& rank : ranks) {
    if (!rank.clock.has_value()) continue;
    (rank.clock->measured() ? measured : unmeasured) = true;
  }
  unmeasured = unmeasured || !measured;
  out << "Times are on the clock of the caller that requested the trace";
  if (measured) {
    out << ": a host with a +/- bound is\nwithin it (half the round trip the caller measured "
           "right before the request),\nplus the clocks' drift since";
  }
  if (unmeasured) {
    out << (measured ? ";\nthe others are early by their" : ": each host's are early by its")
        << "\nrequest's one-way transit (not measured; typically tens to hundreds of us on a LAN)";
  }
  out << ".\n";
}

}  // namespace

absl::Status ValidateMergeFlags(const AnalyzeFlags& f, AnalyzeCommandOptions& out) {
  if (!MergeFlagGiven(f.merge_option)) {
    if (MergeFlagGiven(f.merge_format_option)) {
      return absl::InvalidArgumentError("--merge-format goes with --merge OUT");
    }
    return absl::OkStatus();
  }
  if (out.source != AnalyzeSource::kPaths && out.source != AnalyzeSource::kTraceId) {
    return absl::InvalidArgumentError(
        "--merge goes with trace files, a trace directory or --trace-id (not --since or --diff)");
  }
  if (f.json || !f.html.empty()) {
    return absl::InvalidArgumentError(
        "--merge writes a trace, not a report: give it without --json and --html");
  }
  std::error_code ec;
  if (f.merge.empty() || fs::is_directory(f.merge, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--merge: expected the merged file's path, got \"", f.merge, "\""));
  }
  const fs::path parent = fs::path(f.merge).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("--merge: cannot write ", f.merge, ": ",
                                                   parent.string(), " is not a directory"));
  }
  out.merge_path = f.merge;
  if (f.merge_format.empty() || f.merge_format == "auto") {
    out.merge_format = merge::MergeFormat::kAuto;
  } else if (f.merge_format == "json") {
    out.merge_format = merge::MergeFormat::kJson;
  } else if (f.merge_format == "proto") {
    out.merge_format = merge::MergeFormat::kProto;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--merge-format: expected auto, json or proto, got \"",
                     f.merge_format.substr(0, 40), "\""));
  }
  return absl::OkStatus();
}

int MergePaths(const std::vector<std::string>& paths, const AnalyzeCommandOptions& options,
               const CliEnv& env) {
  absl::StatusOr<std::vector<std::string>> files = ExpandTracePaths(paths);
  if (!files.ok()) {
    *env.err << "gpuctl analyze: " << files.status().message() << "\n";
    return kExitNothingMatched;
  }
  merge::MergeOptions merge_options;
  merge_options.format = options.merge_format;
  absl::StatusOr<merge::MergeResult> result =
      merge::MergeTraces(*files, options.merge_path, merge_options);
  const std::string root =
      options.display_root.empty() ? "" : absl::StrCat(options.display_root, "/");
  auto shown = [&root](const std::string& path) {
    return !root.empty() && absl::StartsWith(path, root) ? path.substr(root.size()) : path;
  };
  if (!result.ok()) {
    *env.err << "gpuctl analyze: --merge: " << shown(std::string(result.status().message()))
             << "\n";
    return kExitPartialFailure;
  }
  for (const std::string& warning : result->warnings) {
    *env.err << "gpuctl analyze: --merge: " << shown(warning) << "\n";
  }
  uint64_t written = 0;
  for (const merge::MergedRank& rank : result->ranks) written += rank.written;
  *env.out << "Merged " << result->ranks.size() << " ranks (" << written << " events) into "
           << result->path << " (" << FormatName(*result) << ", "
           << analysis::FormatBytes(result->stored_bytes) << ")\n";
  for (const merge::MergedRank& rank : result->ranks) {
    *env.out << absl::StrFormat("  pid %-4d %-36s %-20s %9d events", rank.merged_pid,
                                rank.process_name, ClockText(rank), rank.written);
    if (rank.skipped > 0) *env.out << ", " << rank.skipped << " without usable times skipped";
    if (rank.unsupported > 0) {
      *env.out << ", " << rank.unsupported << " of phases protobuf cannot hold skipped";
    }
    *env.out << "   " << shown(rank.path) << "\n";
  }
  PrintAlignment(*env.out, result->ranks);
  return kExitOk;
}

}  // namespace gpuctl::cli
