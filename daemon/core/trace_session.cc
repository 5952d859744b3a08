#include "daemon/core/trace_session.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
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

v1::TraceEvent ProgressEvent(const TraceSlot& slot, v1::ProcessPhase phase, std::string message) {
  v1::TraceEvent event = ProgressEvent(slot.info.pid(), phase, std::move(message));
  v1::ProcessProgress* progress = event.mutable_progress();
  progress->set_events_received(slot.events_received);
  progress->set_bytes_received(slot.bytes_received);
  progress->set_bytes_total(slot.bytes_total);
  return event;
}

v1::ProcessResult WindowResult(const TraceSession& session, const v1::ipc::CaptureResult& result) {
  v1::ProcessResult out;
  if (result.window_start_unix_ns() != 0 || result.window_end_unix_ns() != 0) {
    *out.mutable_window_start() = TimestampFromUnixNanos(result.window_start_unix_ns());
    *out.mutable_window_end() = TimestampFromUnixNanos(result.window_end_unix_ns());
    if (!session.iteration_window() && result.window_start_unix_ns() > 0) {
      absl::Duration skew = absl::FromUnixNanos(result.window_start_unix_ns()) - session.start;
      *out.mutable_start_skew() = ToProtoDuration(std::max(skew, absl::ZeroDuration()));
    }
  }
  out.set_late_start(result.late_start());
  if (session.iteration_window()) {
    out.set_first_step(result.first_step());
    out.set_steps(result.steps());
  }
  return out;
}

std::string WindowNote(const TraceSession& session, const v1::ProcessResult& result) {
  if (result.late_start()) {
    absl::Duration skew = FromProtoDuration(result.start_skew()).value_or(absl::ZeroDuration());
    return absl::StrCat("opened ", absl::FormatDuration(skew),
                        " after the start instant, beyond the max start skew ",
                        absl::FormatDuration(session.max_start_skew), ": the window ran ",
                        absl::FormatDuration(session.duration()), " from its opening");
  }
  if (session.iteration_window() && result.steps() < session.iterations) {
    const uint64_t last_asked = session.start_step + session.iterations - 1;
    if (result.steps() == 0) {
      return absl::StrCat("captured none of steps ", session.start_step, "-", last_asked,
                          " before the bound");
    }
    return absl::StrCat("captured steps ", result.first_step(), "-",
                        result.first_step() + result.steps() - 1, " of ", session.start_step, "-",
                        last_asked, " before the bound");
  }
  return "";
}

v1::TraceManifest BuildManifest(const TraceSession& session, const CoreOptions& options,
                                absl::string_view location, absl::Time completed_at) {
  v1::TraceManifest manifest;
  manifest.set_trace_id(session.id);
  manifest.set_host(options.hostname);
  manifest.set_daemon_version(options.daemon_version);
  manifest.set_job_id(session.request.selector().job_id());
  *manifest.mutable_requested_pids() = session.request.selector().pids();
  *manifest.mutable_duration() = ToProtoDuration(session.duration());
  *manifest.mutable_created_at() = ToProtoTimestamp(session.created_at);
  *manifest.mutable_start_time() = ToProtoTimestamp(session.start);
  *manifest.mutable_completed_at() = ToProtoTimestamp(completed_at);
  for (const TraceSlot& slot : session.slots) *manifest.add_results() = slot.result;
  manifest.set_location(std::string(location));
  *manifest.mutable_activities() = session.request.activities();
  if (session.clock.has_value()) *manifest.mutable_clock() = *session.clock;
  if (session.iteration_window()) {
    manifest.set_iterations(session.iterations);
    manifest.set_start_step(session.start_step);
  } else {
    *manifest.mutable_max_start_skew() = ToProtoDuration(session.max_start_skew);
  }
  manifest.set_selector(session.selector_text);
  *manifest.mutable_trigger() = session.trigger;
  if (session.cancelled) {
    manifest.set_status(v1::TRACE_STATUS_CANCELLED);
    *manifest.mutable_cancellation() = session.cancellation;
  } else {
    manifest.set_status(v1::TRACE_STATUS_COMPLETED);
  }
  return manifest;
}

int32_t AnalysisRank(const TraceSession& session, const TraceSlot& slot) {
  if (slot.info.rank() >= 0) return slot.info.rank();
  int64_t next = 0;
  for (const TraceSlot& other : session.slots) {
    if (other.info.rank() < 0) continue;
    next = std::max<int64_t>(
        next, std::max<int64_t>(other.info.world_size(), int64_t{other.info.rank()} + 1));
  }
  for (const TraceSlot& other : session.slots) {
    if (&other == &slot) break;
    if (other.info.rank() < 0) ++next;
  }
  return static_cast<int32_t>(std::min<int64_t>(next, std::numeric_limits<int32_t>::max()));
}

}  // namespace gpuctl::daemon
