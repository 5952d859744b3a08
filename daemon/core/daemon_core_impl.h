#ifndef GPUCTL_DAEMON_CORE_DAEMON_CORE_IMPL_H_
#define GPUCTL_DAEMON_CORE_DAEMON_CORE_IMPL_H_

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "daemon/core/attach_log.h"
#include "daemon/core/capture_processor.h"
#include "daemon/core/daemon_core.h"
#include "daemon/core/ingest_admission.h"
#include "daemon/core/registry.h"
#include "daemon/core/trace_session.h"

namespace gpuctl::daemon {

// Internal to the core: daemon_core.cc holds the IPC side and result
// handling, trace_control.cc the RPC side and trace life cycle.
class DaemonCoreImpl final : public DaemonCore {
 public:
  DaemonCoreImpl(const CoreOptions& options, const Deps& deps)
      : options_(options),
        deps_(deps),
        started_at_(deps.clock->Now()),
        registry_(options.proc_root, options.allowed_uids),
        admission_(options.max_ingest_bytes),
        attach_log_(deps.loop, deps.clock, {.settle = options.attach_log_settle}) {}
  ~DaemonCoreImpl() override;

  absl::Status OnPeerHello(PeerId peer, const PeerCredentials& creds, const v1::ipc::Hello& hello,
                           std::unique_ptr<StepCounterView> steps) override;
  void OnHelloRefused(const PeerCredentials& creds, const v1::ipc::Hello& hello,
                      const absl::Status& status) override;
  void OnCaptureStarted(PeerId peer, const v1::ipc::CaptureStarted& started) override;
  void OnCaptureResult(PeerId peer, const v1::ipc::CaptureResult& result,
                       std::unique_ptr<Payload> payload) override;
  void OnPayloadProgress(PeerId peer, const v1::ipc::CaptureResult& result,
                         uint64_t received) override;
  void OnPeerGone(PeerId peer, bool clean, absl::string_view reason) override;
  IngestAdmission& ingest() override { return admission_; }

  using DaemonCore::StartTrace;
  absl::StatusOr<std::string> StartTrace(const v1::TraceRequest& request,
                                         const v1::TraceTrigger& trigger,
                                         std::shared_ptr<TraceObserver> observer) override;
  void CancelTrace(absl::string_view trace_id, v1::TraceCancellation why) override;
  absl::StatusOr<v1::ListProcessesResponse> ListProcesses(
      const v1::ListProcessesRequest& request) override;
  v1::GetStatusResponse GetStatus() override;
  void SetAttachListener(AttachListener listener) override {
    attach_listener_ = std::move(listener);
  }
  CoreSnapshot Snapshot() override;

 private:
  // StartTrace without the metrics.
  absl::StatusOr<std::string> StartSession(const v1::TraceRequest& request,
                                           const v1::TraceTrigger& trigger,
                                           std::shared_ptr<TraceObserver> observer);
  absl::StatusOr<std::string> ChooseTraceId(const v1::TraceRequest& request);
  // Takes the selected processes that a scheduled or anomaly trace holds
  // (and has not had a result from) away from it, for on-demand trace
  // `by_trace_id`.
  void PreemptScheduledCaptures(const Selection& selection, const std::string& by_trace_id);
  // The NOT_FOUND status of a request that selected nothing.
  absl::Status NothingMatched(const v1::TraceRequest& request, const Selection& selection);
  // The start step for an iteration window whose request names none.
  uint64_t PickSessionStartStep(const v1::TraceRequest& request, const Selection& selection);
  // Moves a time window's start (and end) to the latest EarliestStart of
  // the processes taking part, unless the request named its instant.
  void MoveStartForPollingPeers(TraceSession& session,
                                const std::vector<std::optional<v1::ProcessResult>>& refusals);
  void EmitStarted(TraceSession& session);
  // (Re)arms the session's deadline timer for `deadline`.
  void ArmDeadline(TraceSession& session, absl::Time deadline);
  // Adds a process that just attached (if still attached) to the oldest
  // active trace whose selector picks it, if any.
  void JoinActiveTrace(PeerId peer);
  // Tells the attach listener of `peer`, if still attached.
  void NotifyAttached(PeerId peer);
  // Disconnects a kineto registration of `pid`, which `library_peer` has
  // just attached through the library.
  void DropKinetoTwin(PeerId library_peer, int32_t pid);
  TraceSession* FindSession(absl::string_view id);
  // The session and slot `peer` is capturing for `trace_id`, if it is
  // still waiting for that peer's result.
  TraceSlot* ActiveSlot(PeerId peer, absl::string_view trace_id, TraceSession** session);
  // Sends StartCapture and reports REQUESTED (with the process's info when
  // it joined late).
  // Sends a selected process its StartCapture; OnStartSent then records the
  // outcome (armed, or lost when the send failed) and reports progress.
  absl::Status SendStartRequest(const TraceSession& session, const TraceSlot& slot);
  void OnStartSent(TraceSession& session, TraceSlot& slot, const absl::Status& sent);
  void SendCancel(const TraceSession& session, PeerId peer, absl::string_view reason);
  void FinishSlot(TraceSession& session, TraceSlot& slot, v1::ProcessResult result);
  void ReleaseProcess(PeerId peer, absl::string_view trace_id);
  void ProcessPayload(TraceSession& session, TraceSlot& slot, const v1::ipc::CaptureResult& result,
                      std::unique_ptr<Payload> payload);
  // Queues a payload (with its host context) for ingest capacity.
  void AdmitPayload(TraceSession& session, TraceSlot& slot, CaptureJob job,
                    v1::ProcessResult window);
  // Converts an admitted payload on the worker.
  // Where a trace's results are converted: the background worker for a
  // scheduled or anomaly trace, when there is one.
  Executor* WorkerFor(const std::string& trace_id);
  void RunCapture(IngestAdmission::Id ingest_id, CaptureJob job, v1::ProcessResult window,
                  PeerId peer);
  void OnProcessed(const std::string& trace_id, PeerId peer, v1::ProcessResult result,
                   absl::Duration conversion);
  // Arms the session's ingest progress timer unless it is armed.
  void ArmIngestProgress(TraceSession& session);
  // Repeats PROCESSING for each slot still processing; re-arms while any is.
  void OnIngestProgress(const std::string& trace_id);
  // Reports the slots whose received bytes changed since the last report.
  void EmitReceiveProgress(TraceSession& session);
  void OnDeadline(const std::string& trace_id);
  void Complete(TraceSession& session);
  // `stored`: the trace's location and storage as the store reports them
  // once the manifest is written.
  void OnManifestWritten(const std::string& trace_id, absl::Status status,
                         v1::TraceCompleted stored);
  void RememberTraceId(const std::string& id);
  // Host context (host_context_control.cc): arms the session's start and
  // fallback end when the request asks for it.
  void PlanHostContext(TraceSession& session);
  void StartHostContext(const std::string& trace_id);
  void StartSlotHostContext(TraceSession& session, TraceSlot& slot);
  // Finishes the recordings still running at the window's end (a result
  // that arrives later finds their output ready).
  void EndHostContext(const std::string& trace_id);
  // Ends `slot`'s recording: its output comes back to OnHostContextReady.
  void FinishSlotHostContext(TraceSession& session, TraceSlot& slot);
  void OnHostContextReady(const std::string& trace_id, PeerId peer, HostContextOutput output);
  // Runs `then` once `slot`'s host context is ready or was never asked for;
  // at once when nothing is pending.
  void AfterHostContext(TraceSession& session, TraceSlot& slot, absl::AnyInvocable<void() &&> then);
  void CancelHostContextTimers(TraceSession& session);
  // Runs `fn` on the loop later unless this core is gone by then.
  template <typename Fn>
  void PostToLoop(Fn fn) {
    deps_.loop->Post([weak = std::weak_ptr<bool>(alive_), fn = std::move(fn)]() mutable {
      if (!weak.expired()) fn();
    });
  }

  const CoreOptions options_;
  const Deps deps_;
  const absl::Time started_at_;
  Registry registry_;
  IngestAdmission admission_;
  AttachLog attach_log_;
  absl::flat_hash_map<std::string, std::unique_ptr<TraceSession>> sessions_;
  // Ids of finished traces, so a caller cannot reuse one.
  std::deque<std::string> recent_ids_;
  absl::flat_hash_set<std::string> recent_set_;
  absl::BitGen random_;
  HostContextSource::Key next_host_context_key_ = 1;
  // What waits for a finishing recording's output (a payload's
  // conversion), by the recording's key.
  absl::flat_hash_map<HostContextSource::Key, std::vector<absl::AnyInvocable<void() &&>>>
      after_host_context_;
  AttachListener attach_listener_;
  // Tasks coming back from the worker check this before touching `this`.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_DAEMON_CORE_IMPL_H_
