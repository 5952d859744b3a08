#include "cli/trace_command.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <optional>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/cancel_group.h"
#include "cli/duration.h"
#include "cli/exit_codes.h"
#include "cli/format.h"
#include "cli/process_listing.h"
#include "cli/proto_time.h"
#include "cli/step_target.h"
#include "cli/trace_download.h"
#include "cli/trace_fanout.h"
#include "cli/trace_progress.h"
#include "cli/trace_report.h"
#include "daemon/common/trace_id.h"

namespace gpuctl::cli {
namespace {

// The start step of an iteration window, picked across the hosts.
struct StepChoice {
  bool interrupted = false;
  absl::Status error;
  uint64_t start_step = 0;
  uint64_t margin = 0;
  std::string explanation;
  // Hosts that did not answer ListProcesses are left out of the trace.
  std::vector<HostProcesses> answers;
};

// The gather phase: every host's selected processes and their current
// steps, then the target (TargetStartStep).
StepChoice PickStartStep(const std::vector<HostEntry>& hosts, const TraceOptions& options,
                         const CliEnv& env) {
  StepChoice choice;
  {
    CancelGroup cancel(env.interrupts);
    choice.answers = ListProcessesOnHosts(hosts, options.selector, options.parallel,
                                          options.host_timeout, cancel, false, env.security);
    if (cancel.cancelled()) {
      choice.interrupted = true;
      return choice;
    }
  }
  std::optional<uint64_t> largest;
  std::string largest_where;
  std::optional<absl::Duration> fastest;
  for (const HostProcesses& answer : choice.answers) {
    const std::string& host =
        answer.response.host().empty() ? answer.target : answer.response.host();
    for (const v1::ProcessInfo& p : answer.response.processes()) {
      if (p.has_current_step() && (!largest || p.current_step() > *largest)) {
        largest = p.current_step();
        largest_where = absl::StrCat("pid ", p.pid(), " on ", Printable(host));
      }
      absl::Duration period = FromProtoDuration(p.step_period());
      if (period > absl::ZeroDuration() && (!fastest || period < *fastest)) fastest = period;
    }
  }
  const uint64_t margin =
      options.step_margin
          ? *options.step_margin
          : AutoStepMargin(options.start_delay.value_or(kDefaultStartDelay), fastest);
  absl::StatusOr<uint64_t> target = TargetStartStep(largest, options.step_roundup, margin);
  if (!target.ok()) {
    choice.error = target.status();
    return choice;
  }
  choice.start_step = *target;
  choice.margin = margin;
  std::string margin_text = absl::StrCat("margin ", margin);
  if (!options.step_margin) {
    absl::StrAppend(&margin_text, fastest ? absl::StrCat(" (auto: fastest step period ",
                                                         FormatUserDuration(*fastest), ")")
                                          : " (auto: no step period known)");
  }
  choice.explanation =
      absl::StrCat(largest ? absl::StrCat("largest current step ", *largest, ", ", largest_where)
                           : std::string("no selected process has marked a step"),
                   "; ", margin_text, ", roundup ", options.step_roundup);
  return choice;
}

std::string StepsText(uint64_t start, uint32_t iterations) {
  return absl::StrCat("steps ", start, "-", start + iterations - 1);
}

std::string NewTraceId() {
  absl::BitGen random;
  return GenerateTraceId(absl::Now(), random);
}

// Fetches the files of every host that stored some; returns false when
// interrupted. Download failures turn the host's status to failed.
bool Download(const TraceOptions& options, const CliEnv& env, TraceReport& report) {
  report.downloads.assign(report.hosts.size(), HostDownload{});
  if (!options.download) return true;
  FleetDownloadOptions request;
  request.trace_id = report.trace_id;
  request.output_root = options.output_root;
  request.parallel = options.parallel;
  request.connect_timeout = options.host_timeout;
  request.transfer_timeout = env.download_timeout;
  request.security = env.security;
  // Files and bytes per host, live on a terminal; nothing in a log.
  std::unique_ptr<DownloadProgress> progress;
  if (env.err_is_terminal) {
    std::vector<std::string> labels;
    for (const HostTrace& host : report.hosts) labels.push_back(host.target);
    progress = MakeTerminalDownloadProgress(*env.err, env.terminal_columns, std::move(labels));
    request.progress = progress.get();
  }
  CancelGroup cancel(env.interrupts);
  report.downloads = DownloadFleetTrace(report.hosts, request, cancel);
  if (progress != nullptr) progress->Finish();
  if (cancel.cancelled()) return false;
  for (size_t i = 0; i < report.hosts.size(); ++i) {
    HostTrace& host = report.hosts[i];
    const HostDownload& download = report.downloads[i];
    if (!download.files.empty()) {
      report.saved_to = (std::filesystem::path(options.output_root) / report.trace_id).string();
    }
    if (!download.attempted || download.status.ok()) continue;
    std::string reason = ClassifyFailure(download.status, host.target).error;
    std::string error = absl::StrCat("download of trace ", report.trace_id, " from ",
                                     Printable(host.name()), " failed: ", reason);
    host.error = host.error.empty() ? error : absl::StrCat(host.error, "; ", error);
    host.status = HostStatus::kFailed;
  }
  return true;
}

// How to look at what was saved, as people do: both read .json.gz as is.
constexpr char kOpenHint[] =
    "open a file in https://ui.perfetto.dev (Open trace file) or chrome://tracing (Load)\n";

// stdout (or stderr with --json) after the table: where things are.
void PrintWhere(const TraceOptions& options, const TraceReport& report, std::ostream& out,
                std::ostream& err) {
  const std::string id = Printable(report.trace_id);
  const bool any_files = std::any_of(report.hosts.begin(), report.hosts.end(),
                                     [](const HostTrace& host) { return host.HasFiles(); });
  if (!report.saved_to.empty() && !options.json) {
    out << "trace " << id << " saved to " << report.saved_to << "\n";
  }
  std::ostream& where = options.json ? err : out;
  if (report.hosts.size() == 1 && report.hosts[0].completed && !report.hosts[0].HasFiles()) {
    where << "no trace data stored: no process delivered a trace (gpuctld at "
          << report.hosts[0].target << " keeps the trace's manifest in "
          << Printable(report.hosts[0].completed->location()) << ")\n";
  } else if (report.hosts.size() == 1 && report.hosts[0].completed) {
    const v1::TraceCompleted& completed = *report.hosts[0].completed;
    where << "stored by gpuctld at " << report.hosts[0].target << " in "
          << Printable(completed.location());
    // Still safe on the daemon's disk; it keeps retrying the upload.
    if (completed.storage().state() == v1::STORAGE_STATE_UPLOAD_PENDING) {
      where << "; upload to " << Printable(completed.storage().remote_location()) << " pending";
      if (!completed.storage().upload_error().empty()) {
        where << ": " << Printable(completed.storage().upload_error());
      }
    }
    where << "\n";
  }
  if (!report.saved_to.empty() && any_files && !options.json) out << kOpenHint;
  if (options.download || options.json) return;
  for (const HostTrace& host : report.hosts) {
    if (host.HasFiles()) {
      out << "download with: gpuctl get " << id << " --host " << host.target << "\n";
    }
  }
}

// Iteration window: the start step, given or picked across the hosts.
// Hosts that could not be asked go to `left_out`. Returns an exit code when
// the trace must not go on.
std::optional<int> SetIterationWindow(const TraceOptions& options, const CliEnv& env,
                                      const std::vector<HostEntry>& hosts,
                                      v1::TraceRequest& request, TraceReport& report,
                                      std::vector<std::optional<HostTrace>>& left_out) {
  report.iterations = options.iterations;
  request.set_iterations(options.iterations);
  request.set_step_roundup(options.step_roundup);
  uint64_t start_step = options.start_step.value_or(0);
  std::string explanation = "given";
  if (!options.start_step) {
    StepChoice choice = PickStartStep(hosts, options, env);
    if (choice.interrupted) {
      *env.err << "gpuctl: trace cancelled before it started\n";
      return kExitInterrupted;
    }
    if (!choice.error.ok()) {
      *env.err << "gpuctl: cannot pick the start step: " << choice.error.message() << "\n";
      return kExitPartialFailure;
    }
    bool answered = false;
    for (size_t i = 0; i < choice.answers.size(); ++i) {
      const HostProcesses& answer = choice.answers[i];
      answered |= answer.status == HostStatus::kOk;
      if (answer.status == HostStatus::kOk) continue;
      HostTrace& host = left_out[i].emplace();
      host.target = answer.target;
      host.status = answer.status;
      host.error = absl::StrCat("listing its processes: ", answer.error);
      // As the plain progress reports the hosts it follows (see Report).
      if (hosts.size() > 1 && !env.err_is_terminal) {
        *env.err << host.target << ": " << HostStatusWord(host.status) << ": " << host.error
                 << "\n";
      }
    }
    start_step = choice.start_step;
    // No host answered: nothing was picked, and no host is traced.
    explanation = answered ? choice.explanation : "";
    // For the record only: the daemon uses start_step as given.
    request.set_step_margin(static_cast<uint32_t>(
        std::min<uint64_t>(choice.margin, std::numeric_limits<uint32_t>::max())));
  }
  request.set_start_step(start_step);
  if (!explanation.empty()) {
    report.start_step = start_step;
    (options.json ? *env.err : *env.out)
        << "start step " << start_step << ": " << StepsText(start_step, options.iterations) << " ("
        << explanation << ")\n";
  }
  return std::nullopt;
}

// Time window: one start instant for every host, from the clock read once.
// One host without --start-delay gets none: the daemon's start delay
// applies (its answer says the instant).
void SetTimeWindow(const TraceOptions& options, size_t host_count, v1::TraceRequest& request,
                   TraceReport& report) {
  ToProtoDuration(options.max_start_skew, request.mutable_max_start_skew());
  report.max_start_skew = options.max_start_skew;
  if (!options.start_delay && host_count == 1) return;
  const absl::Time start = absl::Now() + options.start_delay.value_or(kDefaultStartDelay);
  ToProtoTime(start, request.mutable_start_time());
  report.start_time = start;
}

// Prints the outcome and returns the exit code.
int Report(const TraceOptions& options, const CliEnv& env, const TraceReport& report) {
  std::vector<HostStatus> statuses;
  std::vector<bool> accepted;
  for (const HostTrace& host : report.hosts) {
    statuses.push_back(host.status);
    accepted.push_back(host.accepted());
  }
  const bool any_accepted = std::count(accepted.begin(), accepted.end(), true) > 0;
  const bool fleet = report.hosts.size() > 1;
  if (options.json) {
    *env.out << TraceReportJson(report) << "\n";
  } else if (any_accepted) {
    PrintTraceTable(report, *env.out);
  }
  // One host's failure is said here. A fleet's are rows of the table, or
  // lines of the plain progress; a terminal's display is gone by now.
  const bool said = fleet && ((any_accepted && !options.json) || !env.err_is_terminal);
  for (const HostTrace& host : report.hosts) {
    if (host.status != HostStatus::kOk && !said) *env.err << "gpuctl: " << host.error << "\n";
  }
  PrintWhere(options, report, *env.out, *env.err);
  return FleetExitCode(statuses, accepted);
}

}  // namespace

int RunTrace(const TraceOptions& options, const CliEnv& env) {
  absl::StatusOr<std::vector<HostEntry>> hosts = ResolveHostSpecs(options.hosts);
  if (!hosts.ok()) {
    *env.err << "gpuctl: " << hosts.status().message() << "\n";
    return kExitUsage;
  }
  TraceReport report;
  report.trace_id = options.trace_id.empty() ? NewTraceId() : options.trace_id;
  report.duration = options.duration;
  v1::TraceRequest request;
  *request.mutable_selector() = options.selector;
  if (options.duration) ToProtoDuration(*options.duration, request.mutable_duration());
  request.set_trace_id(report.trace_id);
  for (const std::string& activity : options.activities) request.add_activities(activity);
  for (const std::string& option : options.kineto_options) request.add_kineto_options(option);
  request.set_host_unwind(options.host_unwind);

  // Hosts left out of the trace (no answer in the gather phase), by index.
  std::vector<std::optional<HostTrace>> left_out(hosts->size());
  if (options.iterations > 0) {
    std::optional<int> stop = SetIterationWindow(options, env, *hosts, request, report, left_out);
    if (stop) return *stop;
  } else {
    SetTimeWindow(options, hosts->size(), request, report);
  }

  std::vector<HostEntry> contacted;
  std::vector<size_t> contacted_index;
  std::vector<std::string> targets;
  for (size_t i = 0; i < hosts->size(); ++i) {
    if (left_out[i]) continue;
    contacted.push_back((*hosts)[i]);
    contacted_index.push_back(i);
    targets.push_back((*hosts)[i].target);
  }
  TraceFanoutOptions fanout;
  fanout.request = request;
  fanout.parallel = options.parallel;
  fanout.host_timeout = options.host_timeout;
  fanout.stream_length = options.duration.value_or(kMaxUserDuration) + env.trace_result_limit;
  // The longest start delay a daemon may have: as long as ours.
  fanout.max_daemon_start_delay = kMaxStartDelay;
  fanout.result_margin = env.trace_margin;
  fanout.security = env.security;
  std::unique_ptr<TraceProgress> progress =
      env.err_is_terminal ? MakeTerminalProgress(*env.err, env.terminal_columns, targets)
                          : MakePlainProgress(*env.err, targets);
  TraceFanoutResult result = RunTraceFanout(contacted, fanout, env.interrupts, *progress);
  if (result.interrupted) {
    *env.err << "gpuctl: trace " << Printable(report.trace_id) << " cancelled; "
             << (hosts->size() == 1 ? "the daemon stops" : "the daemons stop") << " the capture\n";
    return kExitInterrupted;
  }
  report.hosts.resize(hosts->size());
  for (size_t i = 0; i < hosts->size(); ++i) {
    if (left_out[i]) report.hosts[i] = *std::move(left_out[i]);
  }
  for (size_t n = 0; n < contacted_index.size(); ++n) {
    report.hosts[contacted_index[n]] = std::move(result.hosts[n]);
  }
  // The instant the daemon chose when none was sent.
  if (options.iterations == 0 && !report.start_time) {
    for (const HostTrace& host : report.hosts) {
      if (!host.started) continue;
      report.start_time = FromProtoTime(host.started->start_time());
      break;
    }
  }
  if (!Download(options, env, report)) {
    *env.err << "gpuctl: download of trace " << Printable(report.trace_id) << " cancelled\n";
    return kExitInterrupted;
  }
  return Report(options, env, report);
}

}  // namespace gpuctl::cli
