#ifndef GPUCTL_DAEMON_CORE_TRACE_SESSION_H_
#define GPUCTL_DAEMON_CORE_TRACE_SESSION_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/common/task_runner.h"
#include "daemon/core/core_metrics.h"
#include "daemon/core/daemon_core.h"
#include "daemon/core/host_context.h"
#include "daemon/core/peer_channel.h"
#include "gpuctl/v1/ipc.pb.h"
#include "gpuctl/v1/manifest.pb.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon {

enum class HostContextPhase {
  kNone,       // not asked for, or not started yet
  kRecording,  // HostContextSource::Start called
  kFinishing,  // Finish called, the output not back yet
  kReady,      // TraceSlot::host_context holds the output
};

// One selected process within a trace.
struct TraceSlot {
  PeerId peer = 0;
  v1::ProcessInfo info;     // as selected
  int32_t own_pid = 0;      // AttachedProcess::own_pid
  bool processing = false;  // payload handed to the worker
  // While processing: the payload's IngestAdmission entry (it may still be
  // waiting for capacity).
  uint64_t ingest_id = 0;
  bool done = false;    // `result` is final
  bool joined = false;  // attached after the request and joined it
  // The trace data received so far (ProcessProgress.events_received ...);
  // `receive_unreported` while the last chunk's count has not been sent.
  uint64_t events_received = 0;
  uint64_t bytes_received = 0;
  uint64_t bytes_total = 0;
  bool receive_unreported = false;
  // Set once the payload is converted: from admission to the stored file.
  std::optional<absl::Duration> conversion{};
  v1::ProcessResult result{};
  // Host context (activities cpu / sched): its recording's key while it
  // records or finishes, and its output once ready.
  HostContextPhase host_context_phase = HostContextPhase::kNone;
  HostContextSource::Key host_context_key = 0;
  std::optional<HostContextOutput> host_context{};
};

// State of one trace from StartTrace until OnDone. Owned by DaemonCore on
// the event loop.
struct TraceSession {
  std::string id;
  v1::TraceRequest request;
  v1::TraceTrigger trigger;   // for the manifest
  std::string selector_text;  // DescribeSelector(request.selector())
  std::shared_ptr<TraceObserver> observer;
  // The daemon's clock when the request arrived.
  absl::Time created_at;
  // Time window: the start instant. Iteration window: created_at (the
  // processes watch for the start step from receipt).
  absl::Time start;
  // start + duration: the window's end, or the bound of an iteration
  // window's wait.
  absl::Time end;
  absl::Duration max_start_skew;
  uint32_t iterations = 0;  // > 0: iteration window
  uint64_t start_step = 0;
  // Set when the request carried caller_time.
  std::optional<v1::ClockOffset> clock;
  // When slots still without a result time out.
  absl::Time deadline;
  TaskRunner::TimerId deadline_timer = 0;
  // Armed while any slot is processing: reports it every
  // kIngestProgressInterval (a sign of life for a long ingest).
  TaskRunner::TimerId ingest_progress_timer = 0;
  // Armed while received bytes wait for their report (see
  // kReceiveProgressInterval); when the last such report went out.
  TaskRunner::TimerId receive_progress_timer = 0;
  absl::Time last_receive_progress = absl::InfinitePast();
  // What host context the request asks for; its start (a little before
  // the window) and fallback end timers; set once the recordings started.
  HostContextWanted host_context;
  TaskRunner::TimerId host_context_start_timer = 0;
  TaskRunner::TimerId host_context_end_timer = 0;
  bool host_context_started = false;
  std::vector<TraceSlot> slots;
  size_t pending = 0;      // slots without a final result
  bool finishing = false;  // every slot done; manifest being written
  bool cancelled = false;
  v1::TraceCancellation cancellation;  // when cancelled: why, who, when

  bool iteration_window() const { return iterations > 0; }
  absl::Duration duration() const { return end - start; }
  TraceSlot* FindSlot(PeerId peer) {
    for (TraceSlot& slot : slots) {
      if (slot.peer == peer) return &slot;
    }
    return nullptr;
  }
  void Emit(const v1::TraceEvent& event) const { observer->OnEvent(event); }
};

v1::TraceEvent ProgressEvent(int32_t pid, v1::ProcessPhase phase, std::string message = "");
// The same, with the slot's received counts.
v1::TraceEvent ProgressEvent(const TraceSlot& slot, v1::ProcessPhase phase,
                             std::string message = "");

// A trace's progress while inline trace data arrives goes out at most this
// often (the slots that received bytes since, one event each), so that a
// large payload's chunks do not flood the caller.
inline constexpr absl::Duration kReceiveProgressInterval = absl::Milliseconds(250);

// While a trace's data waits for ingest capacity or is being converted, the
// core repeats each such process's PROCESSING progress this often, so that
// a caller can tell a long ingest from a daemon that stopped answering.
inline constexpr absl::Duration kIngestProgressInterval = absl::Seconds(10);

// The parts of a ProcessResult that come from the process's CaptureResult
// and the session: window, start skew (time windows), late start, steps.
v1::ProcessResult WindowResult(const TraceSession& session, const v1::ipc::CaptureResult& result);

// What an OK result's message adds for a window that did not run as asked:
// a late start, an iteration window cut short by its bound. Empty otherwise.
std::string WindowNote(const TraceSession& session, const v1::ProcessResult& result);

// The rank under which `slot`'s trace file names itself for analysis tools
// (Holistic Trace Analysis keys a directory's files by it): its own rank
// when known; else the next number after every rank of the trace's world
// (the largest world size, or known rank + 1, among its processes),
// counting the processes of unknown rank in the order they joined, so
// that no two files of the host claim one rank. Processes of unknown rank
// on different hosts of one fan-out trace may still share one.
int32_t AnalysisRank(const TraceSession& session, const TraceSlot& slot);

// The manifest stored beside a finished trace.
v1::TraceManifest BuildManifest(const TraceSession& session, const CoreOptions& options,
                                absl::string_view location, absl::Time completed_at);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_TRACE_SESSION_H_
