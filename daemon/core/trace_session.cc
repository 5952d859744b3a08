#include "daemon/core/trace_session.h"

#include "daemon/core/proto_time.h"

namespace gpuctl::daemon {

v1::TraceEvent ProgressEvent(int32_t pid, v1::ProcessPhase phase, std::string message) {
  v1::TraceEvent event;
  v1::ProcessProgress* progress = event.mutable_progress();
  progress->set_pid(pid);
  progress->set_phase(phase);
  progress->set_message(std::move(message));
  return event;
}

v1::TraceManifest BuildManifest(const TraceSession& session, const CoreOptions& options,
                                absl::string_view location, absl::Time completed_at) {
  v1::TraceManifest manifest;
  manifest.set_trace_id(session.id);
  manifest.set_host(options.hostname);
  manifest.set_daemon_version(options.daemon_version);
  manifest.set_job_id(session.request.selector().job_id());
  *manifest.mutable_requested_pids() = session.request.selector().pids();
  *manifest.mutable_duration() = session.request.duration();
  *manifest.mutable_created_at() = ToProtoTimestamp(session.created_at);
  *manifest.mutable_start_time() = ToProtoTimestamp(session.start);
  *manifest.mutable_completed_at() = ToProtoTimestamp(completed_at);
  for (const TraceSlot& slot : session.slots) *manifest.add_results() = slot.result;
  manifest.set_location(std::string(location));
  *manifest.mutable_activities() = session.request.activities();
  return manifest;
}

}  // namespace gpuctl::daemon
