#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/common/trace_id.h"
#include "daemon/core/capture_processor.h"
#include "daemon/core/daemon_core_impl.h"
#include "daemon/core/proto_time.h"
#include "daemon/core/registry.h"
#include "daemon/core/trace_session.h"
#include "daemon/store/trace_file_name.h"

namespace gpuctl::daemon {

DaemonCoreImpl::~DaemonCoreImpl() {
  alive_.reset();
  for (auto& [id, session] : sessions_) {
    if (session->deadline_timer != 0) deps_.loop->Cancel(session->deadline_timer);
    if (session->ingest_progress_timer != 0) deps_.loop->Cancel(session->ingest_progress_timer);
    if (session->receive_progress_timer != 0) deps_.loop->Cancel(session->receive_progress_timer);
    session->observer->OnDone(absl::UnavailableError("the daemon is shutting down"));
  }
}

absl::Status DaemonCoreImpl::OnPeerHello(PeerId peer, const PeerCredentials& creds,
                                         const v1::ipc::Hello& hello,
                                         std::unique_ptr<StepCounterView> steps) {
  const bool has_steps = steps != nullptr;
  absl::Status status = registry_.Add(peer, creds, hello, deps_.clock->Now(), std::move(steps));
  if (!status.ok()) {
    LogWarning("refused process",
               {{"peer", peer}, {"pid", creds.pid}, {"error", status.ToString()}});
    if (deps_.metrics != nullptr) deps_.metrics->OnHelloRefused(status);
    return status;
  }
  if (deps_.metrics != nullptr) deps_.metrics->OnHelloAccepted();
  AttachLog::Process logged{.pid = creds.pid,
                            .job_id = hello.job_id(),
                            .rank = hello.rank(),
                            .program = {},
                            .labels = hello.labels_size(),
                            .step_counter = has_steps,
                            .library_version = hello.library_version()};
  if (hello.cmdline_size() > 0) {
    absl::string_view program = hello.cmdline(0);
    if (size_t slash = program.rfind('/'); slash != absl::string_view::npos) {
      program.remove_prefix(slash + 1);
    }
    logged.program = std::string(program.substr(0, 64));
  }
  attach_log_.Attached(peer, std::move(logged));
  if (!IsKinetoPeer(peer)) DropKinetoTwin(peer, creds.pid);
  // After this call returns, so that the process hears HelloAck before any
  // StartCapture.
  PostToLoop([this, peer] {
    JoinActiveTrace(peer);
    NotifyAttached(peer);
  });
  return absl::OkStatus();
}

void DaemonCoreImpl::NotifyAttached(PeerId peer) {
  if (!attach_listener_) return;
  const AttachedProcess* process = registry_.Find(peer);
  if (process != nullptr) attach_listener_(process->info);
}

void DaemonCoreImpl::DropKinetoTwin(PeerId library_peer, int32_t pid) {
  // A live pid names one process: a kineto registration of it came from its
  // heartbeat before the library's Hello. CUPTI takes one subscriber, and
  // the library's capture is the richer one, so the library traces it.
  for (const AttachedProcess* process : registry_.All()) {
    if (process->peer == library_peer || !IsKinetoPeer(process->peer) ||
        process->info.pid() != pid) {
      continue;
    }
    const PeerId twin = process->peer;
    LogInfo("kineto registration replaced by the library's",
            {{"pid", pid}, {"kineto_peer", twin}, {"peer", library_peer}});
    deps_.peers->Disconnect(twin, "the process attached through libgpuctl.so, which traces it");
    return;
  }
}

void DaemonCoreImpl::OnHelloRefused(const PeerCredentials& creds, const v1::ipc::Hello& hello,
                                    const absl::Status& status) {
  registry_.RememberRejection(creds, hello, deps_.clock->Now(), status);
  if (deps_.metrics != nullptr) deps_.metrics->OnHelloRefused(status);
}

TraceSession* DaemonCoreImpl::FindSession(absl::string_view id) {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second.get();
}

TraceSlot* DaemonCoreImpl::ActiveSlot(PeerId peer, absl::string_view trace_id,
                                      TraceSession** session) {
  AttachedProcess* process = registry_.Find(peer);
  if (process == nullptr || trace_id.empty() || process->info.current_trace_id() != trace_id) {
    return nullptr;
  }
  *session = FindSession(trace_id);
  if (*session == nullptr) return nullptr;
  TraceSlot* slot = (*session)->FindSlot(peer);
  return slot != nullptr && !slot->done && !slot->processing ? slot : nullptr;
}

void DaemonCoreImpl::OnCaptureStarted(PeerId peer, const v1::ipc::CaptureStarted& started) {
  TraceSession* session = nullptr;
  TraceSlot* slot = ActiveSlot(peer, started.trace_id(), &session);
  if (slot == nullptr) {
    LogWarning("ignoring CaptureStarted for no active capture",
               {{"peer", peer}, {"trace_id", started.trace_id()}});
    return;
  }
  registry_.Find(peer)->info.set_capture_state(v1::CAPTURE_STATE_CAPTURING);
  if (deps_.metrics != nullptr && started.opened_at_unix_ns() > 0) {
    const absl::Time opened = absl::FromUnixNanos(started.opened_at_unix_ns());
    std::optional<absl::Duration> skew;
    if (!session->iteration_window())
      skew = std::max(absl::ZeroDuration(), opened - session->start);
    deps_.metrics->OnWindowOpened(std::max(absl::ZeroDuration(), opened - session->created_at),
                                  skew);
  }
  std::string message;
  if (session->iteration_window()) {
    message = absl::StrCat("opened at step ", started.first_step());
  } else if (started.late_start()) {
    message = absl::StrCat(
        "opened ",
        absl::FormatDuration(absl::FromUnixNanos(started.opened_at_unix_ns()) - session->start),
        " after the start instant, beyond the max start skew ",
        absl::FormatDuration(session->max_start_skew));
  }
  session->Emit(ProgressEvent(slot->info.pid(), v1::PROCESS_PHASE_CAPTURING, std::move(message)));
}

void DaemonCoreImpl::OnCaptureResult(PeerId peer, const v1::ipc::CaptureResult& result,
                                     std::unique_ptr<Payload> payload) {
  TraceSession* session = nullptr;
  TraceSlot* slot = ActiveSlot(peer, result.trace_id(), &session);
  if (slot == nullptr) {
    LogWarning("ignoring CaptureResult for no active capture",
               {{"peer", peer}, {"trace_id", result.trace_id()}});
    return;
  }
  ReleaseProcess(peer, session->id);
  v1::ProcessResult out = WindowResult(*session, result);
  if (result.status() != v1::CAPTURE_STATUS_OK) {
    v1::CaptureStatus status = result.status() == v1::CAPTURE_STATUS_UNSPECIFIED ||
                                       !v1::CaptureStatus_IsValid(result.status())
                                   ? v1::CAPTURE_STATUS_FAILED
                                   : result.status();
    out.set_status(status);
    out.set_message(result.message().empty()
                        ? absl::StrCat("process reported ", v1::CaptureStatus_Name(status))
                        : result.message());
    out.set_dropped_events(result.dropped_events());
    out.set_cupti_dropped_records(result.cupti_dropped_records());
    FinishSlot(*session, *slot, std::move(out));
    return;
  }
  if (payload == nullptr) {
    out.set_status(v1::CAPTURE_STATUS_FAILED);
    out.set_message("process reported success without sending trace data");
    FinishSlot(*session, *slot, std::move(out));
    return;
  }
  uint64_t size = payload->bytes().size();
  if (size > options_.max_payload_bytes) {
    out.set_status(v1::CAPTURE_STATUS_REJECTED);
    out.set_message(absl::StrCat("trace data of ", size, " bytes exceeds the limit of ",
                                 options_.max_payload_bytes, " bytes"));
    out.set_payload_bytes(size);
    FinishSlot(*session, *slot, std::move(out));
    return;
  }
  ProcessPayload(*session, *slot, result, std::move(payload));
}

void DaemonCoreImpl::OnPayloadProgress(PeerId peer, const v1::ipc::CaptureResult& result,
                                       uint64_t received) {
  TraceSession* session = nullptr;
  TraceSlot* slot = ActiveSlot(peer, result.trace_id(), &session);
  if (slot == nullptr) return;
  slot->events_received = result.event_count();
  slot->bytes_received = received;
  slot->bytes_total = result.payload_size();
  slot->receive_unreported = true;
  if (session->receive_progress_timer != 0) return;  // a report is due anyway
  const absl::Time now = deps_.clock->Now();
  const absl::Time next = session->last_receive_progress + kReceiveProgressInterval;
  if (now >= next) {
    EmitReceiveProgress(*session);
    return;
  }
  session->receive_progress_timer = deps_.loop->PostDelayed(
      next - now, [this, weak = std::weak_ptr<bool>(alive_), trace_id = session->id] {
        if (weak.expired()) return;
        TraceSession* session = FindSession(trace_id);
        if (session == nullptr) return;
        session->receive_progress_timer = 0;
        EmitReceiveProgress(*session);
      });
}

void DaemonCoreImpl::EmitReceiveProgress(TraceSession& session) {
  session.last_receive_progress = deps_.clock->Now();
  for (TraceSlot& slot : session.slots) {
    if (!slot.receive_unreported || slot.done || slot.processing) continue;
    slot.receive_unreported = false;
    // One stable text: a display that prints changes only stays quiet.
    session.Emit(ProgressEvent(slot, v1::PROCESS_PHASE_CAPTURING, "receiving trace data"));
  }
}

void DaemonCoreImpl::ProcessPayload(TraceSession& session, TraceSlot& slot,
                                    const v1::ipc::CaptureResult& result,
                                    std::unique_ptr<Payload> payload) {
  slot.processing = true;
  slot.events_received = result.event_count();
  slot.bytes_received = payload->bytes().size();
  slot.bytes_total = slot.bytes_received;
  slot.receive_unreported = false;
  session.Emit(ProgressEvent(slot, v1::PROCESS_PHASE_PROCESSING));
  CaptureJob job;
  job.trace_id = session.id;
  job.host = options_.hostname;
  job.file_name = TraceFileName(options_.hostname, slot.info.rank(), slot.info.pid());
  job.process = slot.info;
  job.own_pid = slot.own_pid;
  job.analysis_rank = AnalysisRank(session, slot);
  job.payload = std::move(payload);
  job.reported_host_only = result.host_only();
  job.reported_cupti_dropped = result.cupti_dropped_records();
  job.window_start_ns = result.window_start_unix_ns() != 0 ? result.window_start_unix_ns()
                                                           : absl::ToUnixNanos(session.start);
  job.window_end_ns = result.window_end_unix_ns() != 0 ? result.window_end_unix_ns()
                                                       : absl::ToUnixNanos(session.end);
  v1::ProcessResult window = WindowResult(session, result);
  ArmIngestProgress(session);
  // The file takes the host context in: its conversion waits for it.
  AfterHostContext(session, slot,
                   [this, trace_id = session.id, peer = slot.peer, job = std::move(job),
                    window = std::move(window)]() mutable {
                     TraceSession* session = FindSession(trace_id);
                     TraceSlot* slot = session == nullptr ? nullptr : session->FindSlot(peer);
                     if (slot == nullptr || slot->done) return;  // cancelled meanwhile
                     if (slot->host_context.has_value()) {
                       job.host_context = slot->host_context->summary;
                       job.host_context_events = slot->host_context->events;
                     }
                     AdmitPayload(*session, *slot, std::move(job), std::move(window));
                   });
}

void DaemonCoreImpl::AdmitPayload(TraceSession& session, TraceSlot& slot, CaptureJob job,
                                  v1::ProcessResult window) {
  const uint64_t bytes = job.payload->bytes().size();
  // An inline payload was admitted before the IPC server read it: its
  // entry already counts these bytes.
  if (const IngestAdmission::Id admitted = job.payload->ingest_id();
      admitted != 0 && admission_.IsRunning(admitted)) {
    slot.ingest_id = admitted;
    RunCapture(admitted, std::move(job), std::move(window), slot.peer);
    return;
  }
  // Conversion is what costs memory (a mapped memfd's pages, once read,
  // and the output): the payload waits here, untouched, until its bytes fit
  // under max_ingest_bytes.
  slot.ingest_id = admission_.Submit(bytes, [this, job = std::move(job), window = std::move(window),
                                             peer = slot.peer](IngestAdmission::Id id) mutable {
    RunCapture(id, std::move(job), std::move(window), peer);
  });
  // FIFO: when anything still waits, this payload (the last in) does.
  if (admission_.waiting_count() > 0) {
    LogInfo("trace data waits for ingest capacity",
            {{"trace_id", session.id},
             {"pid", slot.info.pid()},
             {"payload_bytes", bytes},
             {"converting_bytes", admission_.running_bytes()},
             {"waiting", admission_.waiting_count()}});
  }
}

void DaemonCoreImpl::ArmIngestProgress(TraceSession& session) {
  if (session.ingest_progress_timer != 0) return;
  session.ingest_progress_timer = deps_.loop->PostDelayed(
      kIngestProgressInterval, [this, weak = std::weak_ptr<bool>(alive_), trace_id = session.id] {
        if (!weak.expired()) OnIngestProgress(trace_id);
      });
}

void DaemonCoreImpl::OnIngestProgress(const std::string& trace_id) {
  TraceSession* session = FindSession(trace_id);
  if (session == nullptr) return;
  session->ingest_progress_timer = 0;
  bool any = false;
  for (const TraceSlot& slot : session->slots) {
    if (slot.done || !slot.processing) continue;
    any = true;
    // Stable texts: a display that shows changes only stays quiet.
    session->Emit(ProgressEvent(
        slot, v1::PROCESS_PHASE_PROCESSING,
        admission_.IsRunning(slot.ingest_id) ? "converting" : "waiting for ingest capacity"));
  }
  if (any) ArmIngestProgress(*session);
}

Executor* DaemonCoreImpl::WorkerFor(const std::string& trace_id) {
  const TraceSession* session = FindSession(trace_id);
  const bool on_demand =
      session == nullptr || session->trigger.kind() == v1::TRIGGER_KIND_ON_DEMAND;
  return on_demand || deps_.background_worker == nullptr ? deps_.worker : deps_.background_worker;
}

void DaemonCoreImpl::RunCapture(IngestAdmission::Id ingest_id, CaptureJob job,
                                v1::ProcessResult window, PeerId peer) {
  // The worker touches neither `this` nor the session: the core may be gone
  // by the time it finishes. `this` is used on the loop once `weak` says it
  // is still alive (both live on the loop thread).
  Executor* job_executor = WorkerFor(job.trace_id);
  const absl::Time admitted = deps_.clock->Now();
  job_executor->Run([this, store = deps_.store, loop = deps_.loop, job = std::move(job),
                     window = std::move(window), peer, ingest_id, admitted,
                     weak = std::weak_ptr<bool>(alive_)]() mutable {
    std::string trace_id = job.trace_id;
    v1::ProcessResult processed = ProcessCapture(std::move(job), store);
    processed.MergeFrom(window);
    loop->Post([this, weak = std::move(weak), trace_id = std::move(trace_id), peer, ingest_id,
                admitted, processed = std::move(processed)]() mutable {
      if (weak.expired()) return;
      admission_.Release(ingest_id);
      OnProcessed(trace_id, peer, std::move(processed), deps_.clock->Now() - admitted);
    });
  });
}

void DaemonCoreImpl::OnProcessed(const std::string& trace_id, PeerId peer, v1::ProcessResult result,
                                 absl::Duration conversion) {
  TraceSession* session = FindSession(trace_id);
  TraceSlot* slot = session == nullptr ? nullptr : session->FindSlot(peer);
  if (slot == nullptr || slot->done) return;  // cancelled meanwhile
  slot->processing = false;
  slot->conversion = conversion;
  if (result.status() == v1::CAPTURE_STATUS_OK) {
    if (std::string note = WindowNote(*session, result); !note.empty()) {
      result.set_message(result.message().empty() ? note
                                                  : absl::StrCat(result.message(), "; ", note));
    }
    LogInfo("trace stored", {{"trace_id", trace_id},
                             {"pid", slot->info.pid()},
                             {"file", result.file()},
                             {"events", result.event_count()},
                             {"stored_bytes", result.stored_bytes()}});
  } else {
    LogWarning("trace data not stored",
               {{"trace_id", trace_id}, {"pid", slot->info.pid()}, {"error", result.message()}});
  }
  FinishSlot(*session, *slot, std::move(result));
}

void DaemonCoreImpl::OnPeerGone(PeerId peer, bool clean, absl::string_view reason) {
  AttachedProcess* process = registry_.Find(peer);
  if (process == nullptr) return;
  std::string trace_id = process->info.current_trace_id();
  TraceSession* session = nullptr;
  TraceSlot* slot = ActiveSlot(peer, trace_id, &session);
  attach_log_.Detached(peer, clean, reason, /*in_trace=*/slot != nullptr);
  registry_.Remove(peer);
  if (slot == nullptr) return;
  v1::ProcessResult result;
  if (clean) {
    result.set_status(v1::CAPTURE_STATUS_EXITED);
    result.set_message("the process exited during the capture");
  } else {
    result.set_status(v1::CAPTURE_STATUS_LOST);
    result.set_message(absl::StrCat("lost the connection to the process: ", reason));
  }
  FinishSlot(*session, *slot, std::move(result));
}

void DaemonCoreImpl::ReleaseProcess(PeerId peer, absl::string_view trace_id) {
  AttachedProcess* process = registry_.Find(peer);
  if (process == nullptr || process->info.current_trace_id() != trace_id) return;
  process->info.set_capture_state(v1::CAPTURE_STATE_IDLE);
  process->info.clear_current_trace_id();
}

void DaemonCoreImpl::FinishSlot(TraceSession& session, TraceSlot& slot, v1::ProcessResult result) {
  if (slot.done) return;
  // A recording still running ends with the process's result; its output
  // then has nowhere to go unless trace data is being converted.
  FinishSlotHostContext(session, slot);
  after_host_context_.erase(slot.host_context_key);
  ReleaseProcess(slot.peer, session.id);
  result.set_pid(slot.info.pid());
  result.set_rank(slot.info.rank());
  result.set_host(options_.hostname);
  result.set_job_id(slot.info.job_id());
  result.set_joined_late(slot.joined);
  // Without a window from the process, a time window's result shows the
  // one asked for; an iteration window has none to show.
  if (!result.has_window_start() && !session.iteration_window()) {
    *result.mutable_window_start() = ToProtoTimestamp(session.start);
    *result.mutable_window_end() = ToProtoTimestamp(session.end);
  }
  slot.done = true;
  slot.processing = false;
  slot.result = std::move(result);
  --session.pending;
  if (deps_.metrics != nullptr) deps_.metrics->OnProcessResult(slot.result, slot.conversion);
  v1::TraceEvent event;
  *event.mutable_result() = slot.result;
  session.Emit(event);
  if (session.pending == 0) Complete(session);
}

}  // namespace gpuctl::daemon
