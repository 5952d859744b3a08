#ifndef GPUCTL_DAEMON_CORE_DAEMON_CORE_H_
#define GPUCTL_DAEMON_CORE_DAEMON_CORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/common/clock.h"
#include "daemon/common/task_runner.h"
#include "daemon/core/core_metrics.h"
#include "daemon/core/host_context.h"
#include "daemon/core/ingest_admission.h"
#include "daemon/core/peer_channel.h"
#include "daemon/core/steps.h"
#include "daemon/store/trace_store.h"
#include "gpuctl/v1/ipc.pb.h"
#include "gpuctl/v1/manifest.pb.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon {

inline constexpr absl::Duration kDefaultMaxDuration = absl::Minutes(10);
inline constexpr absl::Duration kDefaultResultGrace = absl::Seconds(10);
inline constexpr absl::Duration kDefaultStartDelay = absl::Milliseconds(100);
// trace.start_delay / --start-delay at most: as far ahead as a request's
// own start instant may be (kMaxStartAhead).
inline constexpr absl::Duration kMaxStartDelay = absl::Hours(1);
inline constexpr uint64_t kDefaultMaxPayloadBytes = uint64_t{256} << 20;
inline constexpr uint64_t kDefaultMaxIngestBytes = uint64_t{512} << 20;
// trace.max_ingest_bytes / --max-ingest-bytes: 0 (no cap) or in
// [kMinIngestBytes, kMaxIngestBytes].
inline constexpr uint64_t kMinIngestBytes = uint64_t{1} << 20;
inline constexpr uint64_t kMaxIngestBytes = uint64_t{1} << 40;
inline constexpr uint64_t kDefaultMaxBufferBytes = uint64_t{128} << 20;

struct CoreOptions {
  std::string hostname;
  std::string daemon_version;
  absl::Duration max_duration = kDefaultMaxDuration;
  // Time allowed after the window closes for a result to arrive.
  absl::Duration result_grace = kDefaultResultGrace;
  // Delay between the request and the window opening, so every process
  // opens together; used when a request names no start instant (as
  // `gpuctl trace` to one host without --start-delay sends). At most
  // kMaxStartDelay.
  absl::Duration start_delay = kDefaultStartDelay;
  // Largest payload accepted from one process.
  uint64_t max_payload_bytes = kDefaultMaxPayloadBytes;
  // Trace data validated and converted at once (trace.max_ingest_bytes);
  // results beyond it wait their turn. 0: no cap.
  uint64_t max_ingest_bytes = kDefaultMaxIngestBytes;
  // Record buffer cap sent to processes.
  uint64_t max_buffer_bytes = kDefaultMaxBufferBytes;
  // Reported by GetStatus only.
  std::string listen_address;
  std::string socket_path;
  // The daemon's view of /proc (process ancestry, container pids).
  std::string proc_root = "/proc";
  // Only processes of these uids may attach (ipc.allowed_uids); empty: any.
  std::vector<uint32_t> allowed_uids;
  // A process is logged as attached once it has stayed this long, or when
  // a trace selects it; those gone sooner are summarized (AttachLog).
  // Zero: every attach and detach is logged at once.
  absl::Duration attach_log_settle = absl::Seconds(2);
};

// The trigger of a trace that `requested_by` asked for (a caller's name;
// empty when unknown).
v1::TraceTrigger OnDemandTrigger(absl::string_view requested_by);

// How a scheduled or anomaly trace's result for a process starts when an
// on-demand trace took the process over (status FAILED); the on-demand
// trace's id follows.
inline constexpr absl::string_view kPreemptedByOnDemand = "preempted by on-demand trace ";

// Receives a trace's progress. Called on the event-loop thread. After
// OnDone no further call is made. A caller that goes away first calls
// DaemonCore::CancelTrace; the core then still calls OnDone (with
// CANCELLED), so the observer must stay alive until OnDone.
class TraceObserver {
 public:
  virtual ~TraceObserver() = default;
  virtual void OnEvent(const v1::TraceEvent& event) = 0;
  virtual void OnDone(const absl::Status& status) = 0;
};

// The daemon's transport-free logic: registry of attached processes, trace
// sessions, result validation, conversion and storage. Every method runs on
// the event-loop thread (`loop`); blocking work goes to `worker`.
class DaemonCore {
 public:
  struct Deps {
    Clock* clock;
    TaskRunner* loop;
    Executor* worker;
    TraceStore* store;
    PeerChannel* peers;
    // Converts scheduled and anomaly traces' results (a low-priority
    // pool), so that on-demand ones never queue behind them; null: `worker`.
    Executor* background_worker = nullptr;
    // Optional: told of registrations, traces and results as they happen.
    CoreMetrics* metrics = nullptr;
    // Records host context (activities cpu / sched) for the windows that
    // ask; null: such a window's results say host context is unavailable.
    HostContextSource* host_context = nullptr;
  };
  static std::unique_ptr<DaemonCore> Create(const CoreOptions& options, const Deps& deps);
  virtual ~DaemonCore() = default;

  // --- IPC side ---
  // A peer completed its Hello. A non-OK status means: refuse (the IPC
  // server sends nothing more and disconnects, logging the message).
  // `steps` is the process's shared step counter, already checked and
  // mapped by the IPC server; null when the Hello shares none. The core
  // keeps it while the process is attached (and drops it on refusal).
  // A process that an active trace's selector picks joins that trace in a
  // task posted to the loop (its StartCapture follows the HelloAck).
  virtual absl::Status OnPeerHello(PeerId peer, const PeerCredentials& creds,
                                   const v1::ipc::Hello& hello,
                                   std::unique_ptr<StepCounterView> steps) = 0;
  // The IPC server refused a Hello on its own (the uid's Hello rate) with
  // `status`; the core lists it with the other refused attachments.
  virtual void OnHelloRefused(const PeerCredentials& creds, const v1::ipc::Hello& hello,
                              const absl::Status& status) = 0;
  virtual void OnCaptureStarted(PeerId peer, const v1::ipc::CaptureStarted& started) = 0;
  // `payload` is null for PAYLOAD_TRANSPORT_NONE. The IPC server has already
  // checked that the payload's size equals result.payload_size.
  virtual void OnCaptureResult(PeerId peer, const v1::ipc::CaptureResult& result,
                               std::unique_ptr<Payload> payload) = 0;
  // Part of `peer`'s inline payload, announced by `result`, has arrived:
  // `received` of result.payload_size() bytes (fewer than all of them:
  // OnCaptureResult follows the last chunk). The core reports it as the
  // process's progress, at most every kReceiveProgressInterval per trace.
  virtual void OnPayloadProgress(PeerId peer, const v1::ipc::CaptureResult& result,
                                 uint64_t received) = 0;
  // The connection is gone (closed, broken, dropped for bad input).
  // `clean` is true when the peer closed it in an orderly way (process exit).
  virtual void OnPeerGone(PeerId peer, bool clean, absl::string_view reason) = 0;
  // The one budget on trace data held for validation and conversion
  // (trace.max_ingest_bytes). The core queues mapped payloads in it; the
  // IPC server reserves an inline payload's announced size in it before
  // reading the chunks, and hands the payload on with that entry
  // (Payload::ingest_id), so every byte counts once, in one FIFO queue.
  virtual IngestAdmission& ingest() = 0;

  // --- RPC side ---
  // Validates the request (INVALID_ARGUMENT with the reason), selects
  // processes (NOT_FOUND naming the host and what is attached when nothing
  // matches), sends StartCapture to each and returns the trace id. An
  // on-demand trace has priority: a selected process held by a scheduled
  // or anomaly trace is cancelled there first (that trace's result for it
  // starts with kPreemptedByOnDemand) and captures the on-demand one. Progress
  // and results then flow to `observer`. `trigger` (who or what asked) goes
  // into the manifest as given; INVALID_ARGUMENT without a kind.
  virtual absl::StatusOr<std::string> StartTrace(const v1::TraceRequest& request,
                                                 const v1::TraceTrigger& trigger,
                                                 std::shared_ptr<TraceObserver> observer) = 0;
  // An on-demand trace whose caller is not named.
  absl::StatusOr<std::string> StartTrace(const v1::TraceRequest& request,
                                         std::shared_ptr<TraceObserver> observer) {
    return StartTrace(request, OnDemandTrigger(""), std::move(observer));
  }
  // Stops the trace's processes that have not delivered and completes it
  // as cancelled; `why` (reason, cancelled_by) goes into its manifest, with
  // the time of the cancel.
  virtual void CancelTrace(absl::string_view trace_id, v1::TraceCancellation why) = 0;
  // The processes the selector picks (every process when it has no
  // criterion), with role, labels and live step counters; with
  // include_rejected also the last refused attachments, newest first.
  // INVALID_ARGUMENT for a malformed selector.
  virtual absl::StatusOr<v1::ListProcessesResponse> ListProcesses(
      const v1::ListProcessesRequest& request) = 0;
  virtual v1::GetStatusResponse GetStatus() = 0;
  // Tells `listener` of each process that attaches (its job id, rank,
  // labels), on the loop, after the process had its chance to join an
  // active trace: the scheduler decides the slot under way for a job whose
  // processes arrive after its boundary. One listener; an empty one stops
  // the calls (its owner sets that before it goes away).
  using AttachListener = absl::AnyInvocable<void(const v1::ProcessInfo&)>;
  virtual void SetAttachListener(AttachListener listener) = 0;
  // Counts of what is attached and in progress now, for gauges.
  virtual CoreSnapshot Snapshot() = 0;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_DAEMON_CORE_H_
