// The RPC side of DaemonCore and a trace's life cycle: request validation,
// selection, StartCapture, deadline, cancellation and completion.
#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/common/excerpt.h"
#include "daemon/common/log.h"
#include "daemon/common/trace_id.h"
#include "daemon/core/daemon_core_impl.h"
#include "daemon/core/proto_time.h"
#include "daemon/core/selector.h"
#include "daemon/core/steps.h"
#include "daemon/core/trace_request.h"

namespace gpuctl::daemon {
namespace {

constexpr size_t kRecentTraceIds = 4096;
constexpr uint32_t kDefaultStepMargin = 2;

v1::ProcessResult ResultWith(v1::CaptureStatus status, std::string message) {
  v1::ProcessResult result;
  result.set_status(status);
  result.set_message(std::move(message));
  return result;
}

// Why `process` cannot take part in `session`, if it cannot.
std::optional<v1::ProcessResult> Refusal(const TraceSession& session,
                                         const AttachedProcess& process) {
  if (process.info.capture_state() != v1::CAPTURE_STATE_IDLE) {
    return ResultWith(v1::CAPTURE_STATUS_BUSY,
                      absl::StrCat("already capturing trace ", process.info.current_trace_id()));
  }
  if (session.iteration_window() &&
      (process.capabilities & v1::ipc::CAPABILITY_STEP_WINDOWS) == 0) {
    return ResultWith(v1::CAPTURE_STATUS_UNAVAILABLE,
                      absl::StrCat("its gpuctl library (", process.info.library_version(),
                                   ") does not capture iteration windows; update it"));
  }
  return std::nullopt;
}

// The clock truncated to whole nanoseconds, the precision of everything the
// daemon reports, so reported differences add up exactly.
absl::Time NowNanos(Clock* clock) { return absl::FromUnixNanos(absl::ToUnixNanos(clock->Now())); }

// The metrics' coarse label of a trigger: scheduled and anomaly traces are
// the daemon's own; everything else was asked for.
TraceTrigger MetricsTrigger(const v1::TraceTrigger& trigger) {
  return trigger.kind() == v1::TRIGGER_KIND_SCHEDULED || trigger.kind() == v1::TRIGGER_KIND_ANOMALY
             ? TraceTrigger::kScheduled
             : TraceTrigger::kOnDemand;
}

}  // namespace

v1::TraceTrigger OnDemandTrigger(absl::string_view requested_by) {
  v1::TraceTrigger trigger;
  trigger.set_kind(v1::TRIGGER_KIND_ON_DEMAND);
  trigger.set_requested_by(std::string(requested_by));
  return trigger;
}

std::unique_ptr<DaemonCore> DaemonCore::Create(const CoreOptions& options, const Deps& deps) {
  return std::make_unique<DaemonCoreImpl>(options, deps);
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
        absl::StrCat("invalid trace id \"", Excerpt(request.trace_id()),
                     "\": expected a lowercase UUIDv7 like 018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b"));
  }
  if (sessions_.contains(request.trace_id()) || recent_set_.contains(request.trace_id())) {
    return absl::AlreadyExistsError(
        absl::StrCat("trace id ", request.trace_id(), " is already in use on this daemon"));
  }
  return request.trace_id();
}

absl::Status DaemonCoreImpl::NothingMatched(const v1::TraceRequest& request,
                                            const Selection& selection) {
  std::string hint;
  if (selection.left_out_by_role > 0) {
    hint = absl::StrCat("; ", selection.left_out_by_role,
                        " matched but are launchers or helpers, which include_helpers selects");
  }
  return absl::NotFoundError(
      absl::StrCat("no attached process matches ", DescribeSelector(request.selector()),
                   " on host ", options_.hostname, " (", registry_.DescribeAttached(), hint, ")"));
}

uint64_t DaemonCoreImpl::PickSessionStartStep(const v1::TraceRequest& request,
                                              const Selection& selection) {
  int64_t largest = -1;
  for (const SelectedProcess& selected : selection.processes) {
    if (selected.process->steps == nullptr) continue;
    StepReading reading = selected.process->steps->Read();
    if (reading.has_step) largest = std::max(largest, static_cast<int64_t>(reading.current_step));
  }
  uint32_t margin = request.step_margin() == 0 ? kDefaultStepMargin : request.step_margin();
  return PickStartStep(largest, request.step_roundup(), margin);
}

absl::StatusOr<std::string> DaemonCoreImpl::StartTrace(const v1::TraceRequest& request,
                                                       const v1::TraceTrigger& trigger,
                                                       std::shared_ptr<TraceObserver> observer) {
  absl::StatusOr<std::string> id = StartSession(request, trigger, std::move(observer));
  if (deps_.metrics != nullptr) {
    if (id.ok()) {
      deps_.metrics->OnTraceStarted(MetricsTrigger(trigger));
    } else {
      deps_.metrics->OnTraceDone(MetricsTrigger(trigger), TraceOutcome::kRefused);
    }
  }
  return id;
}

absl::StatusOr<std::string> DaemonCoreImpl::StartSession(const v1::TraceRequest& request,
                                                         const v1::TraceTrigger& trigger,
                                                         std::shared_ptr<TraceObserver> observer) {
  if (observer == nullptr) return absl::InvalidArgumentError("StartTrace needs an observer");
  if (trigger.kind() == v1::TRIGGER_KIND_UNSPECIFIED) {
    return absl::InvalidArgumentError("StartTrace needs a trigger kind");
  }
  auto owned = std::make_unique<TraceSession>();
  TraceSession& session = *owned;
  session.created_at = NowNanos(deps_.clock);
  absl::StatusOr<TracePlan> plan =
      PlanTrace(request, session.created_at, {options_.max_duration, options_.start_delay});
  if (!plan.ok()) return plan.status();
  auto id = ChooseTraceId(request);
  if (!id.ok()) return id.status();
  Selection selection = registry_.Select(request.selector());
  if (selection.processes.empty()) return NothingMatched(request, selection);
  if (absl::Status reach = registry_.CheckAncestorReach(request.selector(), selection);
      !reach.ok()) {
    return reach;
  }

  if (trigger.kind() == v1::TRIGGER_KIND_ON_DEMAND) PreemptScheduledCaptures(selection, *id);
  session.id = *id;
  session.request = request;
  session.trigger = trigger;
  session.selector_text = DescribeSelector(request.selector());
  session.observer = std::move(observer);
  session.start = plan->start;
  session.end = plan->end;
  session.max_start_skew = plan->max_start_skew;
  session.iterations = plan->iterations;
  session.clock = std::move(plan->clock);
  if (session.iteration_window()) {
    session.start_step =
        plan->start_step.has_value() ? *plan->start_step : PickSessionStartStep(request, selection);
  }
  session.pending = selection.processes.size();
  // Processes that cannot take part end at once; the others proceed.
  std::vector<std::optional<v1::ProcessResult>> refusals;
  for (const SelectedProcess& selected : selection.processes) {
    const AttachedProcess* process = selected.process;
    session.slots.push_back(
        {process->peer, Registry::Info(*process, selected.role), process->own_pid});
    deps_.peers->DescribePeer(process->peer, &session.slots.back().info);
    attach_log_.Noteworthy(process->peer);
    refusals.push_back(Refusal(session, *process));
  }
  if (!session.iteration_window()) MoveStartForPollingPeers(session, refusals);
  sessions_.emplace(session.id, std::move(owned));
  // The requests go out first, before any bookkeeping, logging or progress
  // events: the last process on a busy host learns of the trace that much
  // sooner, which is what trigger latency measures.
  std::vector<absl::Status> sent(session.slots.size());
  for (size_t i = 0; i < session.slots.size(); ++i) {
    if (!refusals[i].has_value()) sent[i] = SendStartRequest(session, session.slots[i]);
  }
  EmitStarted(session);
  LogInfo("trace started", {{"trace_id", session.id},
                            {"selector", session.selector_text},
                            {"processes", session.slots.size()},
                            {"refused", std::count_if(refusals.begin(), refusals.end(),
                                                      [](const auto& r) { return r.has_value(); })},
                            {"start", absl::FormatTime(session.start)},
                            {"duration", absl::FormatDuration(session.duration())},
                            {"iterations", session.iterations},
                            {"start_step", session.start_step}});

  // A start in the past does not shorten the wait: the processes open at
  // once and run the full window.
  ArmDeadline(session, std::max(session.start, session.created_at) + session.duration() +
                           options_.result_grace);
  // Before the refusals: a session they complete cancels its timers.
  PlanHostContext(session);
  for (size_t i = 0; i < session.slots.size(); ++i) {
    if (refusals[i].has_value()) {
      FinishSlot(session, session.slots[i], std::move(*refusals[i]));
    } else {
      OnStartSent(session, session.slots[i], sent[i]);
    }
  }
  return session.id;
}

void DaemonCoreImpl::PreemptScheduledCaptures(const Selection& selection,
                                              const std::string& by_trace_id) {
  for (const SelectedProcess& selected : selection.processes) {
    const AttachedProcess& process = *selected.process;
    if (process.info.capture_state() == v1::CAPTURE_STATE_IDLE) continue;
    TraceSession* held = FindSession(process.info.current_trace_id());
    if (held == nullptr || held->finishing) continue;
    const v1::TriggerKind kind = held->trigger.kind();
    if (kind != v1::TRIGGER_KIND_SCHEDULED && kind != v1::TRIGGER_KIND_ANOMALY) continue;
    TraceSlot* slot = held->FindSlot(process.peer);
    if (slot == nullptr || slot->done || slot->processing) continue;
    const std::string why = absl::StrCat(kPreemptedByOnDemand, by_trace_id);
    LogInfo("scheduled capture preempted",
            {{"trace_id", held->id}, {"pid", process.info.pid()}, {"by", by_trace_id}});
    // The library handles messages in order: the cancel frees it before
    // the on-demand StartCapture arrives.
    SendCancel(*held, process.peer, why);
    FinishSlot(*held, *slot, ResultWith(v1::CAPTURE_STATUS_FAILED, why));
  }
}

void DaemonCoreImpl::MoveStartForPollingPeers(
    TraceSession& session, const std::vector<std::optional<v1::ProcessResult>>& refusals) {
  absl::Time earliest = session.start;
  for (size_t i = 0; i < session.slots.size(); ++i) {
    if (refusals[i].has_value()) continue;
    earliest =
        std::max(earliest, deps_.peers->EarliestStart(session.slots[i].peer, session.created_at));
  }
  // A caller's own instant is kept (other hosts open at it too): a process
  // that cannot make it opens late and says so.
  if (earliest <= session.start || session.request.has_start_time()) return;
  const absl::Duration moved =
      absl::Nanoseconds(absl::ToInt64Nanoseconds(earliest - session.start));
  session.start += moved;
  session.end += moved;
  LogInfo("start instant moved to what polling processes can make",
          {{"trace_id", session.id}, {"moved", absl::FormatDuration(moved)}});
}

void DaemonCoreImpl::EmitStarted(TraceSession& session) {
  v1::TraceEvent started;
  v1::TraceStarted* s = started.mutable_started();
  s->set_trace_id(session.id);
  s->set_host(options_.hostname);
  *s->mutable_start_time() = ToProtoTimestamp(session.start);
  *s->mutable_end_time() = ToProtoTimestamp(session.end);
  for (const TraceSlot& slot : session.slots) *s->add_processes() = slot.info;
  *s->mutable_received_at() = ToProtoTimestamp(session.created_at);
  if (session.clock.has_value()) *s->mutable_clock() = *session.clock;
  if (session.iteration_window()) {
    s->set_start_step(session.start_step);
    s->set_iterations(session.iterations);
  } else {
    *s->mutable_max_start_skew() = ToProtoDuration(session.max_start_skew);
  }
  session.Emit(started);
}

void DaemonCoreImpl::ArmDeadline(TraceSession& session, absl::Time deadline) {
  if (session.deadline_timer != 0) deps_.loop->Cancel(session.deadline_timer);
  session.deadline = deadline;
  session.deadline_timer =
      deps_.loop->PostDelayed(std::max(deadline - deps_.clock->Now(), absl::ZeroDuration()),
                              [this, trace_id = session.id] { OnDeadline(trace_id); });
}

absl::Status DaemonCoreImpl::SendStartRequest(const TraceSession& session, const TraceSlot& slot) {
  v1::ipc::DaemonMessage message;
  v1::ipc::StartCapture* start = message.mutable_start_capture();
  start->set_trace_id(session.id);
  start->set_start_time_unix_ns(absl::ToUnixNanos(session.start));
  start->set_duration_ns(absl::ToInt64Nanoseconds(session.duration()));
  start->set_max_buffer_bytes(options_.max_buffer_bytes);
  // Host context is the daemon's own: the processes get the GPU names.
  for (std::string& activity : GpuActivitiesOf(session.request)) {
    start->add_activities(std::move(activity));
  }
  if (IsKinetoPeer(slot.peer)) {
    for (const std::string& option : session.request.kineto_options()) {
      start->add_activities(absl::StrCat(kKinetoOptionPrefix, option));
    }
  }
  if (session.iteration_window()) {
    start->set_start_step(session.start_step);
    start->set_iterations(session.iterations);
  } else {
    // 0 on the wire means the library's default: a zero skew goes as 1ns.
    start->set_max_start_skew_ns(
        std::max<int64_t>(absl::ToInt64Nanoseconds(session.max_start_skew), 1));
  }
  return deps_.peers->Send(slot.peer, message);
}

void DaemonCoreImpl::OnStartSent(TraceSession& session, TraceSlot& slot, const absl::Status& sent) {
  if (!sent.ok()) {
    FinishSlot(session, slot,
               ResultWith(v1::CAPTURE_STATUS_LOST,
                          absl::StrCat("could not send the capture request: ", sent.message())));
    return;
  }
  AttachedProcess* process = registry_.Find(slot.peer);
  process->info.set_capture_state(v1::CAPTURE_STATE_ARMED);
  process->info.set_current_trace_id(session.id);
  v1::TraceEvent event = ProgressEvent(slot.info.pid(), v1::PROCESS_PHASE_REQUESTED);
  if (slot.joined) *event.mutable_progress()->mutable_joined() = slot.info;
  session.Emit(event);
}

void DaemonCoreImpl::JoinActiveTrace(PeerId peer) {
  if (registry_.Find(peer) == nullptr) return;  // gone meanwhile
  const absl::Time now = deps_.clock->Now();
  std::vector<TraceSession*> candidates;
  for (auto& [id, session] : sessions_) {
    const v1::ProcessSelector& selector = session->request.selector();
    // A trace the process is already in (it was selected before this task
    // ran) is not joined twice.
    if (session->finishing || session->cancelled || now >= session->end ||
        selector.pids_size() > 0 || selector.limit() > 0 || session->FindSlot(peer) != nullptr) {
      continue;
    }
    candidates.push_back(session.get());
  }
  std::sort(candidates.begin(), candidates.end(), [](const TraceSession* a, const TraceSession* b) {
    return std::tie(a->created_at, a->id) < std::tie(b->created_at, b->id);
  });
  for (TraceSession* session : candidates) {
    Selection selection = registry_.Select(session->request.selector());
    auto it = std::find_if(selection.processes.begin(), selection.processes.end(),
                           [peer](const SelectedProcess& s) { return s.process->peer == peer; });
    if (it == selection.processes.end() || Refusal(*session, *it->process).has_value()) continue;
    session->slots.push_back({peer, Registry::Info(*it->process, it->role), it->process->own_pid});
    deps_.peers->DescribePeer(peer, &session->slots.back().info);
    attach_log_.Noteworthy(peer);
    TraceSlot& slot = session->slots.back();
    slot.joined = true;
    ++session->pending;
    LogInfo("process joined trace", {{"trace_id", session->id}, {"pid", slot.info.pid()}});
    // Past the start instant (and its skew) a time window runs its full
    // length from the process's opening: wait for that too.
    if (!session->iteration_window()) {
      absl::Time deadline =
          std::max(session->start, now) + session->duration() + options_.result_grace;
      if (deadline > session->deadline) ArmDeadline(*session, deadline);
    }
    OnStartSent(*session, slot, SendStartRequest(*session, slot));
    if (session->host_context_started && !slot.done) StartSlotHostContext(*session, slot);
    return;
  }
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
  const std::string grace = absl::FormatDuration(options_.result_grace);
  std::string message =
      session->iteration_window()
          ? absl::StrCat("no result within ",
                         absl::FormatDuration(session->duration() + options_.result_grace),
                         " of the request (the ", absl::FormatDuration(session->duration()),
                         " bound on the wait for step ", session->start_step, " plus ", grace,
                         " grace)")
          : absl::StrCat("no result within ",
                         absl::FormatDuration(session->duration() + options_.result_grace),
                         " of the window start (window plus ", grace, " grace)");
  // A slot whose data is being processed has delivered; it finishes on its own.
  for (TraceSlot& slot : session->slots) {
    if (slot.done || slot.processing) continue;
    const std::string why = deps_.peers->ExplainMissingResult(slot.peer, session->id);
    SendCancel(*session, slot.peer, "timed out");
    FinishSlot(*session, slot,
               ResultWith(v1::CAPTURE_STATUS_TIMED_OUT,
                          why.empty() ? message : absl::StrCat(message, ": ", why)));
  }
}

void DaemonCoreImpl::CancelTrace(absl::string_view trace_id, v1::TraceCancellation why) {
  TraceSession* session = FindSession(trace_id);
  if (session == nullptr || session->finishing) return;
  LogInfo("trace cancelled",
          {{"trace_id", trace_id}, {"reason", why.reason()}, {"cancelled_by", why.cancelled_by()}});
  session->cancelled = true;
  *why.mutable_cancelled_at() = ToProtoTimestamp(deps_.clock->Now());
  session->cancellation = std::move(why);
  for (TraceSlot& slot : session->slots) {
    if (slot.done) continue;
    if (!slot.processing) SendCancel(*session, slot.peer, "cancelled");
    // Trace data still waiting for ingest capacity is dropped unconverted.
    if (slot.processing) admission_.Cancel(slot.ingest_id);
    FinishSlot(*session, slot, ResultWith(v1::CAPTURE_STATUS_FAILED, "cancelled"));
  }
}

void DaemonCoreImpl::Complete(TraceSession& session) {
  session.finishing = true;
  CancelHostContextTimers(session);
  if (session.deadline_timer != 0) {
    deps_.loop->Cancel(session.deadline_timer);
    session.deadline_timer = 0;
  }
  if (session.ingest_progress_timer != 0) {
    deps_.loop->Cancel(session.ingest_progress_timer);
    session.ingest_progress_timer = 0;
  }
  if (session.receive_progress_timer != 0) {
    deps_.loop->Cancel(session.receive_progress_timer);
    session.receive_progress_timer = 0;
  }
  const std::string location = deps_.store->Location(session.id);
  v1::TraceManifest manifest = BuildManifest(session, options_, location, deps_.clock->Now());
  // A store with a remote backend replaces this with its own state.
  manifest.mutable_storage()->set_state(v1::STORAGE_STATE_LOCAL);
  manifest.mutable_storage()->set_local_location(location);
  // Storage blocks; the worker writes and the loop reports.
  deps_.worker->Run([this, store = deps_.store, loop = deps_.loop,
                     weak = std::weak_ptr<bool>(alive_), manifest = std::move(manifest)]() mutable {
    absl::Status st = store->PutManifest(manifest);
    // The store may have moved the trace meanwhile (uploaded it): what it
    // holds now is what the caller is told.
    v1::TraceCompleted stored;
    absl::StatusOr<v1::TraceManifest> written =
        st.ok() ? store->GetManifest(manifest.trace_id()) : absl::StatusOr<v1::TraceManifest>(st);
    const v1::TraceManifest& source = written.ok() ? *written : manifest;
    stored.set_location(source.location());
    *stored.mutable_storage() = source.storage();
    loop->Post([this, weak = std::move(weak), trace_id = manifest.trace_id(), st,
                stored = std::move(stored)]() mutable {
      if (!weak.expired()) OnManifestWritten(trace_id, st, std::move(stored));
    });
  });
}

void DaemonCoreImpl::OnManifestWritten(const std::string& trace_id, absl::Status status,
                                       v1::TraceCompleted stored) {
  auto it = sessions_.find(trace_id);
  if (it == sessions_.end()) return;
  std::unique_ptr<TraceSession> session = std::move(it->second);
  sessions_.erase(it);
  RememberTraceId(trace_id);

  v1::TraceEvent event;
  v1::TraceCompleted* completed = event.mutable_completed();
  *completed = std::move(stored);
  completed->set_trace_id(trace_id);
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
                              {"location", completed->location()},
                              {"storage", v1::StorageState_Name(completed->storage().state())}});
  if (!status.ok()) {
    LogError("could not store the manifest",
             {{"trace_id", trace_id}, {"error", status.ToString()}});
    status = absl::Status(status.code(), absl::StrCat("storing the manifest: ", status.message()));
  }
  if (deps_.metrics != nullptr) {
    deps_.metrics->OnTraceDone(MetricsTrigger(session->trigger),
                               session->cancelled ? TraceOutcome::kCancelled
                               : status.ok()      ? TraceOutcome::kCompleted
                                                  : TraceOutcome::kFailed);
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

absl::StatusOr<v1::ListProcessesResponse> DaemonCoreImpl::ListProcesses(
    const v1::ListProcessesRequest& request) {
  if (auto st = ValidateSelector(request.selector()); !st.ok()) return st;
  v1::ListProcessesResponse response;
  response.set_host(options_.hostname);
  absl::Time now = deps_.clock->Now();
  Selection selection = registry_.Select(request.selector(), /*all_when_empty=*/true);
  if (absl::Status reach = registry_.CheckAncestorReach(request.selector(), selection);
      !reach.ok()) {
    return reach;
  }
  for (const SelectedProcess& selected : selection.processes) {
    v1::ProcessInfo* info = response.add_processes();
    *info = Registry::Info(*selected.process, selected.role, request.include_step_durations());
    deps_.peers->DescribePeer(selected.process->peer, info);
    // A process past its window without a result yet is collecting.
    TraceSession* session = FindSession(info->current_trace_id());
    if (session != nullptr && now >= session->end &&
        (info->capture_state() == v1::CAPTURE_STATE_ARMED ||
         info->capture_state() == v1::CAPTURE_STATE_CAPTURING)) {
      info->set_capture_state(v1::CAPTURE_STATE_COLLECTING);
    }
  }
  if (request.include_rejected()) {
    const auto& rejected = registry_.Rejected();
    response.mutable_rejected()->Add(rejected.rbegin(), rejected.rend());
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
  deps_.peers->DescribeStatus(&response);
  return response;
}

CoreSnapshot DaemonCoreImpl::Snapshot() {
  CoreSnapshot snapshot;
  // Every (role, kind) pair, zeros included, so the gauges never vanish.
  absl::flat_hash_map<std::pair<v1::ProcessRole, bool>, uint64_t> counts;
  for (const auto& [peer, role] : registry_.Roles()) {
    const AttachedProcess* process = registry_.Find(peer);
    const bool kineto = process != nullptr && process->info.kind() == v1::PROCESS_KIND_KINETO;
    ++counts[{role, kineto}];
  }
  for (bool kineto : {false, true}) {
    for (v1::ProcessRole role :
         {v1::PROCESS_ROLE_WORKER, v1::PROCESS_ROLE_LAUNCHER, v1::PROCESS_ROLE_HELPER}) {
      snapshot.attached.push_back(
          {.role = role, .kind = kineto ? "kineto" : "library", .count = counts[{role, kineto}]});
    }
  }
  snapshot.active_traces = sessions_.size();
  for (const auto& [id, session] : sessions_) {
    for (const TraceSlot& slot : session->slots) {
      snapshot.captures_in_flight += !slot.done && !slot.processing;
    }
  }
  snapshot.ingest_running_bytes = admission_.running_bytes();
  snapshot.ingest_waiting_bytes = admission_.waiting_bytes();
  snapshot.ingest_waiting_results = admission_.waiting_count();
  snapshot.ingest_max_bytes = admission_.max_bytes();
  return snapshot;
}

}  // namespace gpuctl::daemon
