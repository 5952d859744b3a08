// The RPC side of DaemonCore and a trace's life cycle: request validation,
// selection, StartCapture, deadline, cancellation and completion.
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/common/trace_id.h"
#include "daemon/core/cupti_names.h"
#include "daemon/core/daemon_core_impl.h"
#include "daemon/core/proto_time.h"

namespace gpuctl::daemon {
namespace {

constexpr size_t kRecentTraceIds = 4096;
constexpr int kMaxSelectorPids = 4096;
// Far more than the distinct names; bounds what a request can carry.
constexpr int kMaxActivities = 64;

v1::ProcessResult ResultWith(v1::CaptureStatus status, std::string message) {
  v1::ProcessResult result;
  result.set_status(status);
  result.set_message(std::move(message));
  return result;
}

}  // namespace

std::unique_ptr<DaemonCore> DaemonCore::Create(const CoreOptions& options, const Deps& deps) {
  return std::make_unique<DaemonCoreImpl>(options, deps);
}

absl::Status DaemonCoreImpl::ValidateRequest(const v1::TraceRequest& request,
                                             absl::Duration* duration) {
  if (!request.has_duration()) return absl::InvalidArgumentError("duration is required");
  auto d = FromProtoDuration(request.duration());
  if (!d.ok()) return d.status();
  if (*d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("duration must be positive, got ", absl::FormatDuration(*d)));
  }
  if (*d > options_.max_duration) {
    return absl::InvalidArgumentError(absl::StrCat("duration ", absl::FormatDuration(*d),
                                                   " exceeds this daemon's maximum of ",
                                                   absl::FormatDuration(options_.max_duration)));
  }
  const v1::ProcessSelector& selector = request.selector();
  if (selector.job_id().empty() && selector.pids_size() == 0) {
    return absl::InvalidArgumentError("select processes with a job id or pids");
  }
  if (selector.job_id().size() > kMaxJobIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("job id is longer than ", kMaxJobIdBytes, " bytes"));
  }
  if (selector.pids_size() > kMaxSelectorPids) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", kMaxSelectorPids, " pids"));
  }
  for (int32_t pid : selector.pids()) {
    if (pid <= 0) return absl::InvalidArgumentError(absl::StrCat("invalid pid ", pid));
  }
  if (request.activities_size() > kMaxActivities) {
    return absl::InvalidArgumentError(
        absl::StrCat("more than ", kMaxActivities, " activities; valid: ", ActivityNameList()));
  }
  if (auto st = ValidateActivityNames({request.activities().begin(), request.activities().end()});
      !st.ok()) {
    return st;
  }
  *duration = *d;
  return absl::OkStatus();
}

absl::StatusOr<std::string> DaemonCoreImpl::ChooseTraceId(const v1::TraceRequest& request) {
  if (request.trace_id().empty()) {
    std::string id;
    do {
      id = GenerateTraceId(deps_.clock->Now(), random_);
    } while (sessions_.contains(id) || recent_set_.contains(id));
    return id;
  }
  if (!IsValidTraceId(request.trace_id())) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid trace id \"", request.trace_id().substr(0, 64),
                     "\": expected a lowercase UUIDv7 like 018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b"));
  }
  if (sessions_.contains(request.trace_id()) || recent_set_.contains(request.trace_id())) {
    return absl::AlreadyExistsError(
        absl::StrCat("trace id ", request.trace_id(), " is already in use on this daemon"));
  }
  return request.trace_id();
}

absl::StatusOr<std::string> DaemonCoreImpl::StartTrace(const v1::TraceRequest& request,
                                                       std::shared_ptr<TraceObserver> observer) {
  if (observer == nullptr) return absl::InvalidArgumentError("StartTrace needs an observer");
  absl::Duration duration;
  if (auto st = ValidateRequest(request, &duration); !st.ok()) return st;
  auto id = ChooseTraceId(request);
  if (!id.ok()) return id.status();
  std::vector<AttachedProcess*> selected = registry_.Select(request.selector());
  if (selected.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no attached process matches ", DescribeSelector(request.selector()),
                     " on host ", options_.hostname, " (", registry_.DescribeAttached(), ")"));
  }

  auto owned = std::make_unique<TraceSession>();
  TraceSession& session = *owned;
  session.id = *id;
  session.request = request;
  session.observer = std::move(observer);
  session.created_at = deps_.clock->Now();
  session.start = session.created_at + options_.start_delay;
  session.end = session.start + duration;
  session.pending = selected.size();
  std::vector<std::pair<size_t, std::string>> busy;
  for (AttachedProcess* process : selected) {
    session.slots.push_back({process->peer, process->info, false, false, {}});
    if (process->info.capture_state() != v1::CAPTURE_STATE_IDLE) {
      busy.emplace_back(session.slots.size() - 1,
                        absl::StrCat("already capturing trace ", process->info.current_trace_id()));
    }
  }
  sessions_.emplace(session.id, std::move(owned));

  v1::TraceEvent started;
  v1::TraceStarted* s = started.mutable_started();
  s->set_trace_id(session.id);
  s->set_host(options_.hostname);
  *s->mutable_start_time() = ToProtoTimestamp(session.start);
  *s->mutable_end_time() = ToProtoTimestamp(session.end);
  for (const TraceSlot& slot : session.slots) *s->add_processes() = slot.info;
  session.Emit(started);
  LogInfo("trace started", {{"trace_id", session.id},
                            {"selector", DescribeSelector(request.selector())},
                            {"processes", session.slots.size()},
                            {"busy", busy.size()},
                            {"duration", absl::FormatDuration(duration)}});

  session.deadline_timer =
      deps_.loop->PostDelayed(options_.start_delay + duration + options_.result_grace,
                              [this, trace_id = session.id] { OnDeadline(trace_id); });
  size_t next_busy = 0;
  for (size_t i = 0; i < session.slots.size(); ++i) {
    if (next_busy < busy.size() && busy[next_busy].first == i) {
      FinishSlot(session, session.slots[i],
                 ResultWith(v1::CAPTURE_STATUS_BUSY, std::move(busy[next_busy++].second)));
    } else {
      SendStart(session, session.slots[i]);
    }
  }
  return session.id;
}

void DaemonCoreImpl::SendStart(TraceSession& session, TraceSlot& slot) {
  v1::ipc::DaemonMessage message;
  v1::ipc::StartCapture* start = message.mutable_start_capture();
  start->set_trace_id(session.id);
  start->set_start_time_unix_ns(absl::ToUnixNanos(session.start));
  start->set_duration_ns(absl::ToInt64Nanoseconds(session.end - session.start));
  start->set_max_buffer_bytes(options_.max_buffer_bytes);
  *start->mutable_activities() = session.request.activities();
  absl::Status st = deps_.peers->Send(slot.peer, message);
  if (!st.ok()) {
    FinishSlot(session, slot,
               ResultWith(v1::CAPTURE_STATUS_LOST,
                          absl::StrCat("could not send the capture request: ", st.message())));
    return;
  }
  AttachedProcess* process = registry_.Find(slot.peer);
  process->info.set_capture_state(v1::CAPTURE_STATE_ARMED);
  process->info.set_current_trace_id(session.id);
  session.Emit(ProgressEvent(slot.info.pid(), v1::PROCESS_PHASE_REQUESTED));
}

void DaemonCoreImpl::SendCancel(const TraceSession& session, PeerId peer,
                                absl::string_view reason) {
  v1::ipc::DaemonMessage message;
  message.mutable_cancel_capture()->set_trace_id(session.id);
  message.mutable_cancel_capture()->set_reason(std::string(reason));
  absl::Status st = deps_.peers->Send(peer, message);
  if (!st.ok()) {
    LogWarning("could not send CancelCapture", {{"peer", peer}, {"error", st.ToString()}});
  }
}

void DaemonCoreImpl::OnDeadline(const std::string& trace_id) {
  TraceSession* session = FindSession(trace_id);
  if (session == nullptr) return;
  session->deadline_timer = 0;
  std::string message = absl::StrCat(
      "no result within ",
      absl::FormatDuration(session->end - session->start + options_.result_grace),
      " of the window start (window plus ", absl::FormatDuration(options_.result_grace), " grace)");
  // A slot whose data is being processed has delivered; it finishes on its own.
  for (TraceSlot& slot : session->slots) {
    if (slot.done || slot.processing) continue;
    SendCancel(*session, slot.peer, "timed out");
    FinishSlot(*session, slot, ResultWith(v1::CAPTURE_STATUS_TIMED_OUT, message));
  }
}

void DaemonCoreImpl::CancelTrace(absl::string_view trace_id) {
  TraceSession* session = FindSession(trace_id);
  if (session == nullptr || session->finishing) return;
  LogInfo("trace cancelled", {{"trace_id", trace_id}});
  session->cancelled = true;
  for (TraceSlot& slot : session->slots) {
    if (slot.done) continue;
    if (!slot.processing) SendCancel(*session, slot.peer, "cancelled");
    FinishSlot(*session, slot, ResultWith(v1::CAPTURE_STATUS_FAILED, "cancelled"));
  }
}

void DaemonCoreImpl::Complete(TraceSession& session) {
  session.finishing = true;
  if (session.deadline_timer != 0) {
    deps_.loop->Cancel(session.deadline_timer);
    session.deadline_timer = 0;
  }
  v1::TraceManifest manifest =
      BuildManifest(session, options_, deps_.store->Location(session.id), deps_.clock->Now());
  // Storage blocks; the worker writes and the loop reports.
  deps_.worker->Run([this, store = deps_.store, loop = deps_.loop,
                     weak = std::weak_ptr<bool>(alive_), manifest = std::move(manifest)]() mutable {
    absl::Status st = store->PutManifest(manifest);
    loop->Post([this, weak = std::move(weak), trace_id = manifest.trace_id(), st]() {
      if (!weak.expired()) OnManifestWritten(trace_id, st);
    });
  });
}

void DaemonCoreImpl::OnManifestWritten(const std::string& trace_id, absl::Status status) {
  auto it = sessions_.find(trace_id);
  if (it == sessions_.end()) return;
  std::unique_ptr<TraceSession> session = std::move(it->second);
  sessions_.erase(it);
  RememberTraceId(trace_id);

  v1::TraceEvent event;
  v1::TraceCompleted* completed = event.mutable_completed();
  completed->set_trace_id(trace_id);
  completed->set_location(deps_.store->Location(trace_id));
  for (const TraceSlot& slot : session->slots) {
    if (slot.result.status() == v1::CAPTURE_STATUS_OK) {
      completed->set_processes_ok(completed->processes_ok() + 1);
    } else {
      completed->set_processes_failed(completed->processes_failed() + 1);
    }
  }
  LogInfo("trace completed", {{"trace_id", trace_id},
                              {"ok", completed->processes_ok()},
                              {"failed", completed->processes_failed()},
                              {"location", completed->location()}});
  if (!status.ok()) {
    LogError("could not store the manifest",
             {{"trace_id", trace_id}, {"error", status.ToString()}});
    status = absl::Status(status.code(), absl::StrCat("storing the manifest: ", status.message()));
  }
  session->Emit(event);
  if (session->cancelled) {
    session->observer->OnDone(absl::CancelledError(absl::StrCat("trace ", trace_id, " cancelled")));
  } else {
    session->observer->OnDone(status);
  }
}

void DaemonCoreImpl::RememberTraceId(const std::string& id) {
  if (!recent_set_.insert(id).second) return;
  recent_ids_.push_back(id);
  if (recent_ids_.size() > kRecentTraceIds) {
    recent_set_.erase(recent_ids_.front());
    recent_ids_.pop_front();
  }
}

v1::ListProcessesResponse DaemonCoreImpl::ListProcesses(const v1::ListProcessesRequest& request) {
  v1::ListProcessesResponse response;
  response.set_host(options_.hostname);
  absl::Time now = deps_.clock->Now();
  for (AttachedProcess* process : registry_.Select(request.selector())) {
    v1::ProcessInfo* info = response.add_processes();
    *info = process->info;
    // A process past its window without a result yet is collecting.
    TraceSession* session = FindSession(info->current_trace_id());
    if (session != nullptr && now >= session->end &&
        (info->capture_state() == v1::CAPTURE_STATE_ARMED ||
         info->capture_state() == v1::CAPTURE_STATE_CAPTURING)) {
      info->set_capture_state(v1::CAPTURE_STATE_COLLECTING);
    }
  }
  return response;
}

v1::GetStatusResponse DaemonCoreImpl::GetStatus() {
  v1::GetStatusResponse response;
  response.set_daemon_version(options_.daemon_version);
  response.set_host(options_.hostname);
  *response.mutable_started_at() = ToProtoTimestamp(started_at_);
  response.set_listen_address(options_.listen_address);
  response.set_socket_path(options_.socket_path);
  // The store's root: a trace's location without the trace id.
  std::string location = deps_.store->Location("");
  while (!location.empty() && location.back() == '/') location.pop_back();
  response.set_store_location(location);
  response.set_attached_processes(static_cast<uint32_t>(registry_.size()));
  response.set_active_traces(static_cast<uint32_t>(sessions_.size()));
  response.set_ipc_protocol_major(kIpcProtocolMajor);
  response.set_ipc_protocol_minor(kIpcProtocolMinor);
  *response.mutable_max_duration() = ToProtoDuration(options_.max_duration);
  return response;
}

}  // namespace gpuctl::daemon
