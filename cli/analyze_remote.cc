// `gpuctl analyze --trace-id`, `--since --job` and `--diff`: traces fetched
// from the daemons as `gpuctl get` fetches them (trace:ID for --diff), then
// analysed as local directories.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cli/analyze_command.h"
#include "cli/analyze_fetch.h"
#include "cli/cancel_group.h"
#include "cli/connection.h"
#include "cli/duration.h"
#include "cli/exit_codes.h"
#include "cli/format.h"
#include "cli/list_commands.h"
#include "daemon/analysis/diff.h"
#include "daemon/analysis/trace_set.h"
#include "nlohmann/json.hpp"

namespace gpuctl::cli {
namespace {

using Json = nlohmann::json;

// Kernels listed in the aggregate over a job's traces.
constexpr size_t kSetTopKernels = 5;

// The hosts, a place for the downloads, and the env whose connections give
// up after --host-timeout.
struct FetchContext {
  FetchSettings settings;
  std::optional<ScratchDir> dir;
  CliEnv env;
};

// Usage errors (a DNS name that resolves to nothing is a host error, not
// this) are kExitUsage; a directory that cannot be made kExitPartialFailure.
int PrepareFetch(const AnalyzeCommandOptions& options, const CliEnv& env, FetchContext& out) {
  absl::StatusOr<std::vector<HostEntry>> hosts = ResolveHostSpecs(options.hosts);
  if (!hosts.ok()) {
    *env.err << "gpuctl analyze: " << hosts.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<ScratchDir> dir =
      options.keep_dir.empty() ? ScratchDir::Create() : ScratchDir::Keep(options.keep_dir);
  if (!dir.ok()) {
    *env.err << "gpuctl analyze: " << dir.status().message() << "\n";
    return kExitPartialFailure;
  }
  out.dir.emplace(*std::move(dir));
  out.settings.hosts = *std::move(hosts);
  out.settings.parallel = options.parallel;
  out.settings.root = out.dir->path();
  out.settings.bucket = options.bucket;
  out.env = env;
  out.env.connect_timeout = options.host_timeout;
  return kExitOk;
}

// A daemon's error as `gpuctl get` words it; a local one (a file that could
// not be written, a DNS name without addresses) naming the host.
void PrintHostError(const HostFetch& f, const CliEnv& env) {
  if (IsRpcError(f.status)) {
    ReportError(f.status, f.target, *env.err);
  } else {
    *env.err << "gpuctl analyze: " << f.target << ": " << Printable(f.status.message()) << "\n";
  }
}

// `options` naming the fetched files relative to the temporary directory
// (not with --keep, whose paths stay valid).
AnalyzeCommandOptions WithDisplayRoot(const AnalyzeCommandOptions& options,
                                      const FetchContext& ctx) {
  AnalyzeCommandOptions out = options;
  if (options.keep_dir.empty() && ctx.dir.has_value()) out.display_root = ctx.dir->path();
  return out;
}

// How the hosts' part of one trace went.
struct FetchOutcome {
  std::vector<std::string> directories;  // of the hosts that delivered
  std::vector<std::string> hosts;        // those hosts
  size_t not_found = 0, failed = 0;
};

// Prints why each host did not deliver: "no trace ID on HOST", or the
// error as `gpuctl get` words it.
FetchOutcome Summarize(const std::string& trace_id, const std::vector<HostFetch>& fetches,
                       const CliEnv& env) {
  FetchOutcome out;
  for (const HostFetch& f : fetches) {
    if (f.status.ok()) {
      out.directories.push_back(f.directory);
      out.hosts.push_back(f.target);
      continue;
    }
    if (absl::IsNotFound(f.status) && IsRpcError(f.status)) {
      ++out.not_found;
      *env.err << "gpuctl analyze: no trace " << trace_id << " on " << f.target << "\n";
      continue;
    }
    ++out.failed;
    PrintHostError(f, env);
  }
  return out;
}

// The trace's files from `hosts`: each host's own part, or with --bucket
// the whole trace from the first host that delivers it.
std::vector<HostFetch> FetchParts(const std::string& trace_id, const std::vector<HostEntry>& hosts,
                                  const FetchContext& ctx, CancelGroup& cancel) {
  return ctx.settings.bucket ? FetchTraceFromBucket(trace_id, hosts, ctx.settings, ctx.env, cancel)
                             : FetchTrace(trace_id, hosts, ctx.settings, ctx.env, cancel);
}

// When nothing was delivered: no host has it, or some could not be asked.
int NothingDeliveredCode(const FetchOutcome& outcome) {
  return outcome.failed == 0 ? kExitNothingMatched : kExitDaemonError;
}

}  // namespace

int RunAnalyzeTraceId(const AnalyzeCommandOptions& options, const CliEnv& env) {
  FetchContext ctx;
  if (int code = PrepareFetch(options, env, ctx); code != kExitOk) return code;
  CancelGroup cancel(env.interrupts);
  const FetchOutcome outcome = Summarize(
      options.trace_id, FetchParts(options.trace_id, ctx.settings.hosts, ctx, cancel), env);
  if (cancel.cancelled()) {
    *env.err << "gpuctl analyze: download of trace " << options.trace_id << " cancelled\n";
    return kExitInterrupted;
  }
  if (outcome.directories.empty()) return NothingDeliveredCode(outcome);
  int code = AnalyzePaths(outcome.directories, WithDisplayRoot(options, ctx), env);
  if (outcome.failed > 0) code = std::max(code, kExitPartialFailure);
  if (!options.keep_dir.empty()) {
    *env.err << "trace " << options.trace_id << " kept in " << options.keep_dir << "\n";
  }
  return code;
}

namespace {

// One fetched and analysed trace of the job.
struct JobTrace {
  ListedTrace listed;
  std::vector<std::string> hosts;  // those that delivered
  AnalyzedFiles analyzed;
};

// "=== trace ID, created TIME ===" and "from HOST, HOST", or "from N
// hosts" when the names would not fit 100 columns.
std::string TraceHeading(const JobTrace& t, const CliEnv& env) {
  std::string from = absl::StrCat("from ", Printable(absl::StrJoin(t.hosts, ", ")));
  if (from.size() > 100) from = absl::StrCat("from ", t.hosts.size(), " hosts");
  return absl::StrCat("=== trace ", t.listed.trace_id, ", created ",
                      absl::FormatTime("%Y-%m-%d %H:%M:%S", t.listed.created, env.time_zone),
                      " ===\n", from, "\n");
}

void PrintJobText(const std::vector<JobTrace>& traces, const analysis::SetSummary& set,
                  const CliEnv& env) {
  for (const JobTrace& t : traces) {
    *env.out << TraceHeading(t, env);
    const std::vector<analysis::TraceReport>& reports = t.analyzed.reports;
    if (reports.empty()) {
      *env.out << "no trace file could be read\n\n";
      continue;
    }
    *env.out << analysis::RenderText(reports, analysis::RankFindings(reports), 100) << "\n";
  }
  *env.out << "=== aggregate ===\n"
           << analysis::RenderSetText(set, traces.size(), kSetTopKernels, 100);
}

void PrintJobJson(const AnalyzeCommandOptions& options, const std::vector<JobTrace>& traces,
                  size_t matched, const analysis::SetSummary& set, const CliEnv& env) {
  Json list = Json::array();
  for (const JobTrace& t : traces) {
    const std::vector<analysis::TraceReport>& reports = t.analyzed.reports;
    list.push_back(
        {{"trace_id", t.listed.trace_id},
         {"created_at", absl::FormatTime(absl::RFC3339_sec, t.listed.created, absl::UTCTimeZone())},
         {"hosts", t.hosts},
         {"report", Json::parse(analysis::RenderJson(reports, analysis::RankFindings(reports),
                                                     t.analyzed.errors, options.thresholds))}});
  }
  Json doc = {{"schema", "gpuctl.analyze.set/1"},
              {"job_id", options.job_id},
              {"since_s", absl::ToInt64Seconds(options.since)},
              {"matched", matched},
              {"analyzed", traces.size()},
              {"traces", std::move(list)},
              {"aggregate", Json::parse(analysis::RenderSetJson(set, kSetTopKernels))}};
  *env.out << doc.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
}

}  // namespace

int RunAnalyzeJob(const AnalyzeCommandOptions& options, const CliEnv& env) {
  FetchContext ctx;
  if (int code = PrepareFetch(options, env, ctx); code != kExitOk) return code;
  TraceListing listing = ListJobTraces(options.job_id, options.trigger, absl::Now() - options.since,
                                       ctx.settings, ctx.env);
  for (const HostFetch& f : listing.failed) PrintHostError(f, env);
  const bool hosts_failed = !listing.failed.empty();
  if (listing.traces.empty()) {
    *env.err << "gpuctl analyze: no "
             << (options.trigger == v1::TRIGGER_KIND_UNSPECIFIED
                     ? ""
                     : absl::StrCat(TriggerKindWord(options.trigger), " "))
             << "traces of job " << Printable(options.job_id) << " in the last "
             << FormatUserDuration(options.since) << " on "
             << ctx.settings.hosts.size() - listing.failed.size() << " of "
             << ctx.settings.hosts.size() << (ctx.settings.hosts.size() == 1 ? " host" : " hosts")
             << "\n";
    return listing.failed.size() == ctx.settings.hosts.size() ? kExitDaemonError
                                                              : kExitNothingMatched;
  }
  const size_t matched = listing.traces.size();
  if (matched > options.max_traces) {
    *env.err << "gpuctl analyze: " << matched << " traces matched; analyzing the newest "
             << options.max_traces << " (--max-traces)\n";
    listing.traces.resize(options.max_traces);
  }
  CancelGroup cancel(env.interrupts);
  std::vector<JobTrace> traces;
  std::vector<analysis::TraceReport> all;
  bool incomplete = hosts_failed;
  for (ListedTrace& listed : listing.traces) {
    const FetchOutcome outcome =
        Summarize(listed.trace_id, FetchParts(listed.trace_id, listed.hosts, ctx, cancel), env);
    if (cancel.cancelled()) {
      *env.err << "gpuctl analyze: download of trace " << listed.trace_id << " cancelled\n";
      return kExitInterrupted;
    }
    incomplete |= outcome.failed > 0 || outcome.not_found > 0;
    if (outcome.directories.empty()) continue;
    absl::StatusOr<std::vector<std::string>> files = ExpandTracePaths(outcome.directories);
    JobTrace t{std::move(listed), outcome.hosts, {}};
    if (files.ok()) {
      t.analyzed = AnalyzeFiles(*files, WithDisplayRoot(options, ctx), env);
    } else {
      *env.err << "gpuctl analyze: trace " << t.listed.trace_id << ": " << files.status().message()
               << "\n";
    }
    incomplete |= !files.ok() || !t.analyzed.errors.empty();
    all.insert(all.end(), t.analyzed.reports.begin(), t.analyzed.reports.end());
    traces.push_back(std::move(t));
  }
  if (traces.empty()) return kExitDaemonError;
  const analysis::SetSummary set = analysis::SummarizeSet(all);
  if (options.json) {
    PrintJobJson(options, traces, matched, set, env);
  } else {
    PrintJobText(traces, set, env);
  }
  return incomplete ? kExitPartialFailure : kExitOk;
}

namespace {

// One side of --diff: its trace files, fetched first for trace:ID; empty
// with the error printed and `code` set otherwise.
std::vector<std::string> DiffSideFiles(const std::string& side, const std::string& name,
                                       const AnalyzeCommandOptions& options, const CliEnv& env,
                                       std::optional<FetchContext>& ctx, int& code) {
  std::vector<std::string> paths = {side};
  if (side.rfind("trace:", 0) == 0) {
    const std::string id = side.substr(6);
    if (!ctx.has_value()) {
      ctx.emplace();
      if (int prepared = PrepareFetch(options, env, *ctx); prepared != kExitOk) {
        code = prepared;
        ctx.reset();
        return {};
      }
    }
    FetchSettings settings = ctx->settings;
    settings.root = absl::StrCat(settings.root, "/", name);
    CancelGroup cancel(env.interrupts);
    const FetchOutcome outcome =
        Summarize(id, FetchTrace(id, settings.hosts, settings, ctx->env, cancel), env);
    if (cancel.cancelled()) {
      code = kExitInterrupted;
      return {};
    }
    if (outcome.directories.empty()) {
      code = NothingDeliveredCode(outcome);
      return {};
    }
    if (outcome.failed > 0) code = kExitPartialFailure;
    paths = outcome.directories;
  }
  absl::StatusOr<std::vector<std::string>> files = ExpandTracePaths(paths);
  if (!files.ok()) {
    *env.err << "gpuctl analyze: --diff " << name << ": " << files.status().message() << "\n";
    code = kExitNothingMatched;
    return {};
  }
  return *std::move(files);
}

}  // namespace

int RunAnalyzeDiff(const AnalyzeCommandOptions& options, const CliEnv& env) {
  std::unique_ptr<AtomicFile> html;
  if (!options.html_path.empty()) {
    absl::StatusOr<std::unique_ptr<AtomicFile>> created = CreateHtmlReportFile(options.html_path);
    if (!created.ok()) {
      *env.err << "gpuctl analyze: --html: " << created.status().message() << "\n";
      return kExitUsage;
    }
    html = *std::move(created);
  }
  std::optional<FetchContext> ctx;
  int code = kExitOk;
  std::vector<analysis::TraceReport> sides[2];
  bool read_errors = false;
  const char* names[2] = {"before", "after"};
  for (int i = 0; i < 2; ++i) {
    int side_code = kExitOk;
    const std::vector<std::string> files =
        DiffSideFiles(options.diff[i], names[i], options, env, ctx, side_code);
    if (files.empty()) return side_code;
    code = std::max(code, side_code);
    AnalyzedFiles analyzed =
        AnalyzeFiles(files, ctx.has_value() ? WithDisplayRoot(options, *ctx) : options, env);
    read_errors |= !analyzed.errors.empty();
    if (analyzed.reports.empty()) {
      *env.err << "gpuctl analyze: --diff " << names[i] << ": no trace file could be read\n";
      return kExitPartialFailure;
    }
    sides[i] = std::move(analyzed.reports);
  }
  const analysis::TraceSetDiff diff = analysis::DiffTraceSets(sides[0], sides[1], options.top);
  *env.out << (options.json
                   ? analysis::RenderDiffJson(diff, options.diff[0], options.diff[1])
                   : analysis::RenderDiffText(diff, options.diff[0], options.diff[1], 100));
  if (html != nullptr) {
    absl::Status written =
        html->Append(analysis::RenderDiffHtml(diff, options.diff[0], options.diff[1]));
    if (written.ok()) written = html->Commit();
    if (!written.ok()) {
      *env.err << "gpuctl analyze: --html: " << written.message() << "\n";
      return kExitPartialFailure;
    }
    if (!options.json) *env.out << "\nHTML report: " << options.html_path << "\n";
  }
  return read_errors ? std::max(code, kExitPartialFailure) : code;
}

}  // namespace gpuctl::cli
