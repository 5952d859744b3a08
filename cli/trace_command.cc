#include "cli/trace_command.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/connection.h"
#include "cli/download.h"
#include "cli/duration.h"
#include "cli/exit_codes.h"
#include "cli/format.h"
#include "cli/trace_progress.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/client_context.h"

namespace gpuctl::cli {
namespace {

// What the Trace stream delivered.
struct TraceOutcome {
  std::optional<v1::TraceStarted> started;
  std::map<int32_t, v1::ProcessResult> results;  // by pid
  std::optional<v1::TraceCompleted> completed;
  grpc::Status status;
  bool interrupted = false;

  std::string trace_id() const {
    if (completed) return completed->trace_id();
    return started ? started->trace_id() : "";
  }
  // Selected processes the daemon never reported on.
  std::vector<const v1::ProcessInfo*> Missing() const {
    std::vector<const v1::ProcessInfo*> missing;
    if (!started) return missing;
    for (const v1::ProcessInfo& p : started->processes()) {
      if (!results.contains(p.pid())) missing.push_back(&p);
    }
    return missing;
  }
  bool AllOk() const {
    if (!started || !completed || !Missing().empty()) return false;
    return std::all_of(results.begin(), results.end(), [](const auto& entry) {
      return entry.second.status() == v1::CAPTURE_STATUS_OK;
    });
  }
};

TraceOutcome RunStream(v1::Gpuctl::Stub& stub, const TraceOptions& options, const CliEnv& env,
                       TraceProgress& progress) {
  v1::TraceRequest request;
  request.mutable_selector()->set_job_id(options.job_id);
  for (int32_t pid : options.pids) request.mutable_selector()->add_pids(pid);
  const absl::Duration d = options.duration;
  const int64_t seconds = absl::ToInt64Seconds(d);
  request.mutable_duration()->set_seconds(seconds);
  request.mutable_duration()->set_nanos(
      static_cast<int32_t>(absl::ToInt64Nanoseconds(d - absl::Seconds(seconds))));
  request.set_trace_id(options.trace_id);
  for (const std::string& activity : options.activities) request.add_activities(activity);

  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + d + env.trace_margin));
  TraceOutcome outcome;
  std::atomic<bool> interrupted{false};
  {
    ScopedInterruptHandler on_interrupt(env.interrupts, [&] {
      interrupted = true;
      context.TryCancel();
    });
    std::unique_ptr<grpc::ClientReader<v1::TraceEvent>> reader = stub.Trace(&context, request);
    v1::TraceEvent event;
    while (reader->Read(&event)) {
      switch (event.event_case()) {
        case v1::TraceEvent::kStarted:
          outcome.started = event.started();
          progress.Started(event.started());
          break;
        case v1::TraceEvent::kProgress:
          progress.Progress(event.progress());
          break;
        case v1::TraceEvent::kResult:
          outcome.results[event.result().pid()] = event.result();
          progress.Result(event.result());
          break;
        case v1::TraceEvent::kCompleted:
          outcome.completed = event.completed();
          break;
        default:
          break;  // An event kind newer than this CLI.
      }
    }
    outcome.status = reader->Finish();
  }
  outcome.interrupted = interrupted;
  progress.Finish();
  return outcome;
}

// Rows by rank (unknown last), then pid.
std::vector<const v1::ProcessResult*> SortedResults(const TraceOutcome& outcome) {
  std::vector<const v1::ProcessResult*> rows;
  for (const auto& [pid, result] : outcome.results) rows.push_back(&result);
  std::sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
    auto key = [](const v1::ProcessResult* r) {
      return std::make_tuple(r->host(), r->rank() < 0, r->rank(), r->pid());
    };
    return key(a) < key(b);
  });
  return rows;
}

void PrintTable(const TraceOutcome& outcome, std::ostream& out) {
  Table table({"HOST", "PID", "RANK", "STATUS", "EVENTS", "BYTES", "FILE"},
              {false, true, true, false, true, true, false});
  for (const v1::ProcessResult* r : SortedResults(outcome)) {
    std::string note;
    if (r->status() != v1::CAPTURE_STATUS_OK) note = Printable(r->message());
    if (r->dropped_events() > 0) {
      absl::StrAppend(&note, note.empty() ? "" : "; ", r->dropped_events(),
                      " events dropped (capture buffers full)");
    }
    bool ok = r->status() == v1::CAPTURE_STATUS_OK;
    table.AddRow(
        {Printable(r->host()), absl::StrCat(r->pid()), RankText(r->rank()), StatusWord(r->status()),
         ok ? absl::StrCat(r->event_count()) : "-", ok ? HumanBytes(r->stored_bytes()) : "-",
         r->file().empty() ? "-" : Printable(r->file())},
        std::move(note));
  }
  for (const v1::ProcessInfo* p : outcome.Missing()) {
    table.AddRow({Printable(p->hostname()), absl::StrCat(p->pid()), RankText(p->rank()),
                  "no result", "-", "-", "-"},
                 "the daemon reported no result for this process");
  }
  table.Render(out);
}

void AddJson(google::protobuf::Value* value, const google::protobuf::Message& message) {
  // Round-trips the protobuf JSON mapping; cannot fail for a message we
  // just printed.
  (void)google::protobuf::util::JsonStringToMessage(ToJson(message), value);
}

std::string OutcomeJson(const TraceOutcome& outcome, const DownloadResult* download) {
  google::protobuf::Struct root;
  auto& fields = *root.mutable_fields();
  fields["traceId"].set_string_value(outcome.trace_id());
  if (outcome.started) fields["host"].set_string_value(outcome.started->host());
  if (outcome.completed) AddJson(&fields["completed"], *outcome.completed);
  google::protobuf::ListValue* results = fields["results"].mutable_list_value();
  for (const v1::ProcessResult* r : SortedResults(outcome)) AddJson(results->add_values(), *r);
  google::protobuf::ListValue* missing = fields["missingPids"].mutable_list_value();
  for (const v1::ProcessInfo* p : outcome.Missing())
    missing->add_values()->set_number_value(p->pid());
  if (download != nullptr) {
    fields["savedTo"].set_string_value(download->directory);
    google::protobuf::ListValue* files = fields["files"].mutable_list_value();
    for (const DownloadedFile& f : download->files) files->add_values()->set_string_value(f.name);
  }
  return ToJson(root);
}

// Reports a stream that did not end with TraceCompleted; returns the exit code.
int ReportStreamFailure(const TraceOutcome& outcome, const TraceOptions& options,
                        std::ostream& err) {
  if (outcome.status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && outcome.started) {
    err << "gpuctl: gpuctld at " << options.target << " did not finish trace "
        << Printable(outcome.trace_id()) << " in time\n";
    return kExitDaemonError;
  }
  if (!outcome.status.ok()) return ReportError(FromRpcStatus(outcome.status), options.target, err);
  err << "gpuctl: gpuctld at " << options.target
      << " ended the trace stream before the trace completed\n";
  return kExitDaemonError;
}

}  // namespace

int RunTrace(const TraceOptions& options, const CliEnv& env) {
  std::ostream& out = *env.out;
  std::ostream& err = *env.err;
  absl::StatusOr<std::unique_ptr<v1::Gpuctl::Stub>> stub = OpenStub(options.target, env);
  if (!stub.ok()) return ReportError(stub.status(), options.target, err);

  std::unique_ptr<TraceProgress> progress = env.err_is_terminal
                                                ? MakeTerminalProgress(err, env.terminal_columns)
                                                : MakePlainProgress(err);
  TraceOutcome outcome = RunStream(**stub, options, env, *progress);
  if (outcome.interrupted) {
    err << "gpuctl: trace " << (outcome.started ? Printable(outcome.trace_id()) + " " : "")
        << "cancelled; the daemon stops the capture\n";
    return kExitInterrupted;
  }
  if (!outcome.status.ok() || !outcome.completed) {
    if (!outcome.results.empty() && !options.json) PrintTable(outcome, out);
    return ReportStreamFailure(outcome, options, err);
  }

  bool ok = outcome.AllOk();
  std::optional<DownloadResult> download;
  bool has_files = std::any_of(outcome.results.begin(), outcome.results.end(),
                               [](const auto& entry) { return !entry.second.file().empty(); });
  if (!options.json) PrintTable(outcome, out);
  if (options.download && has_files) {
    DownloadOptions request;
    request.trace_id = outcome.trace_id();
    request.output_root = options.output_root;
    request.timeout = env.download_timeout;
    request.interrupts = env.interrupts;
    absl::StatusOr<DownloadResult> result = DownloadTrace(**stub, request);
    if (result.ok()) {
      download = *std::move(result);
    } else if (absl::IsCancelled(result.status()) && !IsRpcError(result.status())) {
      err << "gpuctl: download of trace " << Printable(request.trace_id) << " cancelled\n";
      return kExitInterrupted;
    } else {
      err << "gpuctl: download of trace " << Printable(request.trace_id) << " failed\n";
      ReportError(result.status(), options.target, err);
      ok = false;
    }
  }
  if (options.json) {
    out << OutcomeJson(outcome, download ? &*download : nullptr) << "\n";
  } else if (download) {
    out << "trace " << Printable(outcome.trace_id()) << " saved to " << download->directory << "\n";
  }
  std::ostream& where = options.json ? err : out;
  where << "stored by gpuctld at " << options.target << " in "
        << Printable(outcome.completed->location()) << "\n";
  if (!options.download && has_files && !options.json) {
    out << "download with: gpuctl get " << Printable(outcome.trace_id()) << " --host "
        << options.target << "\n";
  }
  return ok ? kExitOk : kExitPartialFailure;
}

}  // namespace gpuctl::cli
