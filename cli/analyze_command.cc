#include "cli/analyze_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/bounded_parallel.h"
#include "cli/exit_codes.h"
#include "cli/flag_number.h"
#include "daemon/analysis/analyze.h"
#include "daemon/analysis/report.h"
#include "daemon/analysis/trace_reader.h"
#include "daemon/common/posix_file.h"

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

}  // namespace

void AddAnalyzeFlags(CLI::App* cmd, AnalyzeFlags& f) {
  cmd->add_option("traces", f.paths, "Trace files (.json, .json.gz) or trace directories")
      ->required();
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
  cmd->add_option("--jobs", f.jobs,
                  "Files read at once (default: the CPUs, at most 8); memory grows with it");
}

absl::StatusOr<AnalyzeCommandOptions> ValidateAnalyzeFlags(const AnalyzeFlags& f) {
  AnalyzeCommandOptions out;
  out.paths = f.paths;
  out.json = f.json;
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

int RunAnalyze(const AnalyzeCommandOptions& options, const CliEnv& env) {
  absl::StatusOr<std::vector<std::string>> files = ExpandTracePaths(options.paths);
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
  // One model per worker at a time; each is dropped once analysed.
  std::vector<std::optional<absl::StatusOr<analysis::TraceReport>>> results(files->size());
  RunBounded(files->size(), options.jobs, [&](size_t i) {
    absl::StatusOr<analysis::TraceModel> model = analysis::ReadTraceFile((*files)[i]);
    if (!model.ok()) {
      results[i] = model.status();
      return;
    }
    results[i] = analysis::AnalyzeModel(*model, options.thresholds);
  });
  std::vector<analysis::TraceReport> reports;
  std::vector<analysis::TraceError> errors;
  for (size_t i = 0; i < files->size(); ++i) {
    absl::StatusOr<analysis::TraceReport>& result = *results[i];
    if (!result.ok()) {
      errors.push_back({(*files)[i], std::string(result.status().message())});
      *env.err << "gpuctl analyze: " << result.status().message() << "\n";
      continue;
    }
    reports.push_back(*std::move(result));
  }
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
