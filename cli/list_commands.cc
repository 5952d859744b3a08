#include "cli/list_commands.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cli/cancel_group.h"
#include "cli/connection.h"
#include "cli/download.h"
#include "cli/duration.h"
#include "cli/exit_codes.h"
#include "cli/format.h"
#include "cli/proto_time.h"
#include "daemon/analysis/units.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/client_context.h"

namespace gpuctl::cli {
namespace {

// ListTraces' largest page.
constexpr int kMaxPageSize = 1000;

void SetDeadline(grpc::ClientContext& context, absl::Duration timeout) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

// The STATE column of `gpuctl traces`.
absl::string_view StorageStateWord(v1::StorageState state) {
  switch (state) {
    case v1::STORAGE_STATE_LOCAL:
      return "local";
    case v1::STORAGE_STATE_UPLOAD_PENDING:
      return "pending";
    case v1::STORAGE_STATE_UPLOADED:
      return "uploaded";
    default:
      return "-";  // stored by a daemon that did not say
  }
}

// A manifest without a trigger comes from a daemon that recorded none,
// when every trace was on demand.
v1::TriggerKind KindOf(const v1::TraceManifest& t) {
  return t.trigger().kind() == v1::TRIGGER_KIND_UNSPECIFIED ? v1::TRIGGER_KIND_ON_DEMAND
                                                            : t.trigger().kind();
}

// The TRIGGER column: "on-demand", "scheduled:RULE", "anomaly:RULE".
std::string TriggerText(const v1::TraceManifest& t) {
  const v1::TriggerKind kind = KindOf(t);
  std::string text(TriggerKindWord(kind));
  if (kind != v1::TRIGGER_KIND_ON_DEMAND && !t.trigger().scheduled().rule().empty()) {
    absl::StrAppend(&text, ":", Printable(t.trigger().scheduled().rule()));
  }
  return text;
}

// `get`'s NOT_FOUND: the daemon names the trace ("no trace ID", "trace ID
// has no file ..."), the CLI adds which daemon it asked. An older daemon's
// message named its store's paths instead.
std::string NotFoundText(const absl::Status& status, const std::string& trace_id,
                         const std::string& target, bool named_files) {
  const std::string message = Printable(status.message());
  const std::string subject = absl::StrCat("trace ", trace_id);
  const size_t at = message.find(subject);
  if (at != std::string::npos) {
    return absl::StrCat(message.substr(0, at + subject.size()), " on ", target,
                        message.substr(at + subject.size()));
  }
  if (!named_files) return absl::StrCat("no ", subject, " on ", target);
  return absl::StrCat("gpuctld at ", target, ": ", message);
}

// "cancelled at 2026-12-01 22:41:03 by ipv4:10.0.0.5:51234: the caller ...".
std::string CancellationText(const v1::TraceCancellation& c, absl::TimeZone zone) {
  std::string text = "cancelled";
  if (c.has_cancelled_at()) absl::StrAppend(&text, " at ", TimestampText(c.cancelled_at(), zone));
  if (!c.cancelled_by().empty()) absl::StrAppend(&text, " by ", Printable(c.cancelled_by()));
  if (!c.reason().empty()) absl::StrAppend(&text, ": ", Printable(c.reason()));
  return text;
}

// "auto, serving: \0dynolog\0 and /run/gpuctl/kineto/dynolog, 3 processes".
std::string KinetoText(const v1::KinetoBridgeStatus& k) {
  std::vector<std::string> sockets;
  if (k.abstract_socket()) sockets.push_back("\\0dynolog\\0");
  if (!k.socket_path().empty()) sockets.push_back(k.socket_path());
  std::string text = absl::StrCat(k.mode(), ", ", k.state());
  if (!sockets.empty()) absl::StrAppend(&text, ": ", absl::StrJoin(sockets, " and "));
  absl::StrAppend(&text, ", ", k.processes(), k.processes() == 1 ? " process" : " processes");
  if (!k.message().empty()) absl::StrAppend(&text, " (", k.message(), ")");
  return text;
}

// Columns the line under a trace's row may take, and the indent Table
// gives it.
constexpr size_t kSummaryLineWidth = 100;
constexpr size_t kNoteIndent = 4;

// A summary whose numbers can be true: none negative or beyond a day, the
// busy time within the span, p50 at most p99. Others are left out.
bool Plausible(const v1::ProcessSummary& s) {
  constexpr int64_t kDayNs = int64_t{86400} * 1'000'000'000;
  for (int64_t ns : {s.gpu_span_ns(), s.compute_ns(), s.communication_ns(), s.memory_ns(),
                     s.idle_ns(), s.step_p50_ns(), s.step_p99_ns(), s.top_kernel_ns()}) {
    if (ns < 0 || ns > kDayNs) return false;
  }
  return s.compute_ns() + s.communication_ns() + s.memory_ns() <= s.gpu_span_ns() &&
         s.step_p50_ns() <= s.step_p99_ns();
}

// The line under a trace's row from its processes' ingest summaries:
// "GPU busy 72% (min 61% rank 3), step p50 181 ms p99 240 ms, top gemm 41%".
// Busy is the processes' GPU busy time over their GPU spans (the least
// busy process named when several differ), the steps those of the slowest
// process, the top kernel the name with the most GPU time across them, as
// a share of the busy time. Empty when no process has a summary.
std::string SummaryText(const v1::TraceManifest& t) {
  // Sums in double: a daemon's numbers are not trusted not to overflow.
  double span = 0, busy = 0;
  int64_t step_p50 = 0, step_p99 = 0;
  int gpu_processes = 0, min_rank = -1;
  double min_share = 2;
  std::map<std::string, double> kernels;
  for (const v1::ProcessResult& r : t.results()) {
    if (!r.has_summary() || !Plausible(r.summary())) continue;
    const v1::ProcessSummary& s = r.summary();
    const double process_busy = static_cast<double>(s.compute_ns()) +
                                static_cast<double>(s.communication_ns()) +
                                static_cast<double>(s.memory_ns());
    if (s.gpu_span_ns() > 0) {
      ++gpu_processes;
      span += static_cast<double>(s.gpu_span_ns());
      busy += process_busy;
      const double share = process_busy / static_cast<double>(s.gpu_span_ns());
      if (share < min_share) {
        min_share = share;
        min_rank = r.rank();
      }
    }
    if (s.steps() > 0) {
      step_p50 = std::max(step_p50, s.step_p50_ns());
      step_p99 = std::max(step_p99, s.step_p99_ns());
    }
    if (!s.top_kernel().empty()) kernels[s.top_kernel()] += static_cast<double>(s.top_kernel_ns());
  }
  std::vector<std::string> parts;
  if (span > 0) {
    const double share = busy / span;
    std::string text = absl::StrFormat("GPU busy %.0f%%", 100 * share);
    if (gpu_processes > 1 && std::lround(100 * min_share) != std::lround(100 * share)) {
      absl::StrAppend(&text, absl::StrFormat(" (min %.0f%%", 100 * min_share),
                      min_rank >= 0 ? absl::StrCat(" rank ", min_rank) : "", ")");
    }
    parts.push_back(std::move(text));
  }
  if (step_p99 > 0) {
    parts.push_back(absl::StrCat("step p50 ", analysis::FormatNs(step_p50), " p99 ",
                                 analysis::FormatNs(step_p99)));
  }
  std::string line = absl::StrJoin(parts, ", ");
  if (!kernels.empty() && busy > 0) {
    auto top = std::max_element(kernels.begin(), kernels.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second < b.second : a.first > b.first;
    });
    const std::string share = absl::StrFormat(" %.0f%%", 100 * top->second / busy);
    std::string name = Printable(top->first);
    const std::string lead = line.empty() ? "top " : ", top ";
    const size_t used = kNoteIndent + line.size() + lead.size() + share.size();
    const size_t room = used < kSummaryLineWidth ? kSummaryLineWidth - used : 0;
    if (name.size() > room) {
      // Cut at a character boundary, leaving room for "...".
      size_t cut = room > 3 ? room - 3 : 0;
      while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
      name = cut > 0 ? absl::StrCat(name.substr(0, cut), "...") : "";
    }
    if (!name.empty()) absl::StrAppend(&line, lead, name, share);
  }
  return line;
}

// The lines under a trace's row: its cancellation, its summary.
std::string NoteText(const v1::TraceManifest& t, const CliEnv& env) {
  std::vector<std::string> lines;
  if (t.status() == v1::TRACE_STATUS_CANCELLED) {
    lines.push_back(CancellationText(t.cancellation(), env.time_zone));
  }
  if (std::string summary = SummaryText(t); !summary.empty()) lines.push_back(std::move(summary));
  return absl::StrJoin(lines, absl::StrCat("\n", std::string(kNoteIndent, ' ')));
}

}  // namespace

absl::string_view TriggerKindWord(v1::TriggerKind kind) {
  switch (kind) {
    case v1::TRIGGER_KIND_ON_DEMAND:
      return "on-demand";
    case v1::TRIGGER_KIND_SCHEDULED:
      return "scheduled";
    case v1::TRIGGER_KIND_ANOMALY:
      return "anomaly";
    default:
      return "-";
  }
}

absl::StatusOr<v1::TriggerKind> ParseTriggerKind(absl::string_view word) {
  for (v1::TriggerKind kind :
       {v1::TRIGGER_KIND_SCHEDULED, v1::TRIGGER_KIND_ANOMALY, v1::TRIGGER_KIND_ON_DEMAND}) {
    if (word == TriggerKindWord(kind)) return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat("--trigger: \"", Printable(word.substr(0, 64)),
                                                 "\" is not scheduled, anomaly or on-demand"));
}

absl::StatusOr<std::vector<v1::TraceManifest>> ListStoredTraces(v1::Gpuctl::StubInterface& stub,
                                                                const std::string& target,
                                                                const TracesQuery& query,
                                                                absl::Duration rpc_timeout) {
  const v1::TriggerKind trigger = query.trigger;
  const int limit = query.limit;
  std::vector<v1::TraceManifest> all;
  std::set<std::string> seen_tokens;
  std::string token;
  bool older_seen = false;
  do {
    v1::ListTracesRequest request;
    request.set_job_id(query.job_id);
    request.set_trigger(trigger);
    request.set_bucket(query.bucket);
    request.set_bucket_days(query.bucket_days);
    request.set_page_token(token);
    if (limit > 0) {
      request.set_page_size(std::min(limit - static_cast<int>(all.size()), kMaxPageSize));
    }
    v1::ListTracesResponse page;
    grpc::ClientContext context;
    SetDeadline(context, rpc_timeout);
    grpc::Status status = stub.ListTraces(&context, request, &page);
    if (!status.ok()) return FromRpcStatus(status);
    for (v1::TraceManifest& trace : *page.mutable_traces()) {
      if (limit > 0 && static_cast<int>(all.size()) >= limit) break;
      // A daemon older than the trigger filter lists every trace.
      if (trigger != v1::TRIGGER_KIND_UNSPECIFIED && KindOf(trace) != trigger) continue;
      if (query.created_after != absl::InfinitePast() &&
          absl::FromUnixSeconds(trace.created_at().seconds()) +
                  absl::Nanoseconds(trace.created_at().nanos()) <
              query.created_after) {
        // Newest first: every later page is older still.
        older_seen = true;
        break;
      }
      all.push_back(std::move(trace));
    }
    token = page.next_page_token();
    // A token seen before would page forever.
    if (!token.empty() && !seen_tokens.insert(token).second) {
      return absl::DataLossError(
          absl::StrCat("gpuctld at ", target, " repeated a page token; listing stopped"));
    }
  } while (!token.empty() && !older_seen && (limit <= 0 || static_cast<int>(all.size()) < limit));
  return all;
}

int RunTraces(const std::string& target, const TracesQuery& query, bool json, const CliEnv& env) {
  const std::string& job_id = query.job_id;
  const v1::TriggerKind trigger = query.trigger;
  absl::StatusOr<std::unique_ptr<v1::Gpuctl::Stub>> stub = OpenStub(target, env);
  if (!stub.ok()) return ReportError(stub.status(), target, *env.err);
  absl::StatusOr<std::vector<v1::TraceManifest>> listed =
      ListStoredTraces(**stub, target, query, env.rpc_timeout);
  if (!listed.ok()) {
    if (absl::IsDataLoss(listed.status()) && !IsRpcError(listed.status())) {
      *env.err << "gpuctl: " << listed.status().message() << "\n";
      return kExitDaemonError;
    }
    return ReportError(listed.status(), target, *env.err);
  }
  v1::ListTracesResponse all;
  for (v1::TraceManifest& trace : *listed) *all.add_traces() = std::move(trace);

  if (json) {
    *env.out << ToJson(all) << "\n";
    return kExitOk;
  }
  if (all.traces_size() == 0) {
    *env.err << "no "
             << (trigger == v1::TRIGGER_KIND_UNSPECIFIED
                     ? ""
                     : absl::StrCat(TriggerKindWord(trigger), " "))
             << "traces" << (job_id.empty() ? "" : absl::StrCat(" of job ", job_id))
             << (query.bucket ? " in the bucket of gpuctld at " : " stored by gpuctld at ")
             << target << "\n";
    return kExitOk;
  }
  Table table({"TRACE ID", "CREATED", "JOB", "PROCESSES", "SIZE", "STATE", "TRIGGER", "LOCATION"},
              {false, false, false, true, true, false, false, false});
  for (const v1::TraceManifest& t : all.traces()) {
    uint64_t bytes = 0;
    int ok = 0;
    for (const v1::ProcessResult& r : t.results()) {
      bytes += r.stored_bytes();
      ok += r.status() == v1::CAPTURE_STATUS_OK ? 1 : 0;
    }
    table.AddRow(
        {Printable(t.trace_id()), TimestampText(t.created_at(), env.time_zone),
         t.job_id().empty() ? "-" : Printable(t.job_id()), absl::StrCat(ok, "/", t.results_size()),
         HumanBytes(bytes), std::string(StorageStateWord(t.storage().state())), TriggerText(t),
         t.location().empty() ? "-" : Printable(t.location())},
        NoteText(t, env));
  }
  table.Render(*env.out);
  return kExitOk;
}

int RunStatus(const std::string& target, bool json, const CliEnv& env) {
  absl::StatusOr<std::unique_ptr<v1::Gpuctl::Stub>> stub = OpenStub(target, env);
  if (!stub.ok()) return ReportError(stub.status(), target, *env.err);
  v1::GetStatusResponse s;
  grpc::ClientContext context;
  SetDeadline(context, env.rpc_timeout);
  grpc::Status status = (*stub)->GetStatus(&context, {}, &s);
  if (!status.ok()) return ReportError(FromRpcStatus(status), target, *env.err);
  if (json) {
    *env.out << ToJson(s) << "\n";
    return kExitOk;
  }
  Table table({"FIELD", "VALUE"});
  auto row = [&](absl::string_view name, const std::string& value) {
    table.AddRow({std::string(name), value.empty() ? "-" : Printable(value)});
  };
  row("host", s.host());
  row("version", s.daemon_version());
  row("started", TimestampText(s.started_at(), env.time_zone));
  row("listening on", s.listen_address());
  row("socket", s.socket_path());
  row("store", s.store_location());
  row("attached processes", absl::StrCat(s.attached_processes()));
  row("active traces", absl::StrCat(s.active_traces()));
  row("ipc protocol", absl::StrCat(s.ipc_protocol_major(), ".", s.ipc_protocol_minor()));
  row("max duration",
      s.has_max_duration() ? FormatUserDuration(FromProtoDuration(s.max_duration())) : "");
  if (s.has_kineto()) row("kineto bridge", KinetoText(s.kineto()));
  // A key/value listing reads better without the header row.
  std::ostringstream rendered;
  table.Render(rendered);
  std::string text = rendered.str();
  *env.out << text.substr(text.find('\n') + 1);
  return kExitOk;
}

int RunGet(const std::string& target, const std::string& trace_id,
           const std::vector<std::string>& files, const std::string& output_root, bool bucket,
           const CliEnv& env) {
  absl::StatusOr<std::unique_ptr<v1::Gpuctl::Stub>> stub = OpenStub(target, env);
  if (!stub.ok()) return ReportError(stub.status(), target, *env.err);
  DownloadOptions options;
  options.trace_id = trace_id;
  options.files = files;
  options.output_root = output_root;
  options.bucket = bucket;
  options.timeout = env.download_timeout;
  CancelGroup cancel(env.interrupts);
  options.cancel = &cancel;
  absl::StatusOr<DownloadResult> result = DownloadTrace(**stub, options);
  if (!result.ok()) {
    if (absl::IsCancelled(result.status()) && !IsRpcError(result.status())) {
      *env.err << "gpuctl: download of trace " << trace_id << " cancelled\n";
      return kExitInterrupted;
    }
    if (absl::IsNotFound(result.status()) && IsRpcError(result.status())) {
      *env.err << "gpuctl: " << NotFoundText(result.status(), trace_id, target, !files.empty())
               << "\n";
      return kExitNothingMatched;
    }
    return ReportError(result.status(), target, *env.err);
  }
  Table table({"FILE", "BYTES"}, {false, true});
  for (const DownloadedFile& f : result->files) table.AddRow({f.name, HumanBytes(f.size)});
  table.Render(*env.out);
  *env.out << "trace " << trace_id << " saved to " << result->directory << "\n";
  if (result->trace_status == v1::TRACE_STATUS_CANCELLED) {
    // What was saved is what the processes delivered before the cancel.
    *env.err << "gpuctl: trace " << trace_id << " was "
             << CancellationText(result->cancellation, env.time_zone) << "\n";
    return kExitPartialFailure;
  }
  return kExitOk;
}

}  // namespace gpuctl::cli
