#ifndef GPUCTL_DAEMON_CORE_TRACE_SESSION_H_
#define GPUCTL_DAEMON_CORE_TRACE_SESSION_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/common/task_runner.h"
#include "daemon/core/daemon_core.h"
#include "daemon/core/peer_channel.h"
#include "gpuctl/v1/manifest.pb.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon {

// One selected process within a trace.
struct TraceSlot {
  PeerId peer = 0;
  v1::ProcessInfo info;     // as selected
  bool processing = false;  // payload handed to the worker
  bool done = false;        // `result` is final
  v1::ProcessResult result;
};

// State of one trace from StartTrace until OnDone. Owned by DaemonCore on
// the event loop.
struct TraceSession {
  std::string id;
  v1::TraceRequest request;
  std::shared_ptr<TraceObserver> observer;
  absl::Time created_at;
  absl::Time start;
  absl::Time end;
  TaskRunner::TimerId deadline_timer = 0;
  std::vector<TraceSlot> slots;
  size_t pending = 0;      // slots without a final result
  bool finishing = false;  // every slot done; manifest being written
  bool cancelled = false;

  TraceSlot* FindSlot(PeerId peer) {
    for (TraceSlot& slot : slots) {
      if (slot.peer == peer) return &slot;
    }
    return nullptr;
  }
  void Emit(const v1::TraceEvent& event) const { observer->OnEvent(event); }
};

v1::TraceEvent ProgressEvent(int32_t pid, v1::ProcessPhase phase, std::string message = "");

// The manifest stored beside a finished trace.
v1::TraceManifest BuildManifest(const TraceSession& session, const CoreOptions& options,
                                absl::string_view location, absl::Time completed_at);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_TRACE_SESSION_H_
