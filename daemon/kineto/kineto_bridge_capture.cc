// The kineto bridge's capture side: StartCapture to config text, the
// window's start, the trace file's pickup and the result.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "daemon/common/log.h"
#include "daemon/kineto/kineto_bridge.h"

namespace gpuctl::daemon::kineto {
namespace {

// Slack for the jitter of a process's poll and for the config's way in.
constexpr absl::Duration kStartMargin = absl::Milliseconds(300);
// kineto's profiler thread looks at a received config once a tick
// (Config::kControllerIntervalMsecs) and refuses one whose start is then
// closer than the warm-up.
constexpr absl::Duration kControllerTick = absl::Seconds(1);
// At delivery, the least time left before the start beyond tick and warm-up.
constexpr absl::Duration kDeliveryMargin = absl::Milliseconds(150);
// The time window an iteration request falls back to in a process whose
// kineto has counted no iteration yet (no optimizer step reported to it),
// which then ignores ACTIVITIES_ITERATIONS.
constexpr absl::Duration kIterationFallback = absl::Seconds(2);
// Traces whose kineto byte totals are remembered (kineto.max_total_bytes).
constexpr size_t kMaxTraceTotals = 1024;
// How long after a cancelled window's end its file is waited for, and how
// many such files at once.
constexpr absl::Duration kAbandonedWait = absl::Minutes(2);
constexpr size_t kMaxAbandoned = 256;

// The trace's bytes as the core stores them: already a finished file.
class PreparedPayload final : public Payload {
 public:
  PreparedPayload(std::string gzip, PreparedTrace info) : gzip_(std::move(gzip)), info_(info) {}
  absl::Span<const uint8_t> bytes() const override {
    return {reinterpret_cast<const uint8_t*>(gzip_.data()), gzip_.size()};  // NOLINT
  }
  const PreparedTrace* prepared() const override { return &info_; }

 private:
  std::string gzip_;
  PreparedTrace info_;
};

std::string LogFileFor(absl::string_view trace_id) {
  return absl::StrCat("/tmp/gpuctl-kineto-", trace_id, ".json");
}

// kineto writes <base>_<pid>.json, with its own pid.
std::string WrittenFile(absl::string_view log_file, int32_t own_pid) {
  absl::string_view base = log_file.substr(0, log_file.size() - 5);  // ".json"
  return absl::StrCat(base, "_", own_pid, ".json");
}

// The request's kineto_options, which the core adds to a kineto peer's
// activities (kKinetoOptionPrefix); the activity names themselves are
// CUPTI's and mean nothing to kineto.
void SetProfileOptions(const v1::ipc::StartCapture& start, KinetoCaptureConfig* config) {
  for (absl::string_view activity : start.activities()) {
    if (!absl::ConsumePrefix(&activity, kKinetoOptionPrefix)) continue;
    config->with_stack |= activity == "with_stack";
    config->record_shapes |= activity == "record_shapes";
    config->profile_memory |= activity == "profile_memory";
    config->with_flops |= activity == "with_flops";
    config->with_modules |= activity == "with_modules";
  }
}

}  // namespace

absl::Status KinetoBridge::Send(PeerId peer, const v1::ipc::DaemonMessage& message) {
  Process* process = Find(peer);
  if (process == nullptr) return absl::NotFoundError("the kineto process is gone");
  if (message.has_cancel_capture()) {
    // kineto cannot stop a window it has taken: its file is removed when
    // it appears.
    if (process->capture.has_value() &&
        process->capture->trace_id == message.cancel_capture().trace_id()) {
      if (process->capture->delivered) Abandon(*process);
      process->capture.reset();
    }
    return absl::OkStatus();
  }
  if (!message.has_start_capture()) return absl::OkStatus();
  const v1::ipc::StartCapture& start = message.start_capture();
  Capture capture;
  capture.trace_id = start.trace_id();
  capture.config.log_file = LogFileFor(start.trace_id());
  capture.config.trace_id = start.trace_id();
  capture.config.warmup_secs = options_.warmup_secs;
  const absl::Time start_time = absl::FromUnixNanos(start.start_time_unix_ns());
  const absl::Duration duration = absl::Nanoseconds(start.duration_ns());
  if (start.iterations() > 0) {
    capture.config.iterations = start.iterations();
    capture.config.start_roundup = 1;
    capture.config.start = start_time;
    capture.config.duration = std::min(kIterationFallback, duration);
  } else {
    capture.config.start = start_time;
    capture.config.duration = duration;
  }
  capture.end = start_time + duration;
  SetProfileOptions(start, &capture.config);
  // Checked now, so that a value out of bounds fails the request at once.
  if (absl::StatusOr<std::string> text = BuildConfigText(capture.config); !text.ok()) {
    return text.status();
  }
  if (process->capture.has_value()) {
    return absl::FailedPreconditionError("the kineto process already has a capture");
  }
  process->capture = std::move(capture);
  if (!process->idle) {
    // After the core has marked it armed (this call returns first).
    PostToLoop([this, peer, trace_id = start.trace_id()] {
      Process* p = Find(peer);
      if (p == nullptr || !p->capture.has_value() || p->capture->trace_id != trace_id) return;
      if (p->idle) return;  // an idle heartbeat came meanwhile and took it
      ReportFailure(*p, v1::CAPTURE_STATUS_BUSY,
                    "kineto's activity profiler is busy (the job's own torch.profiler, or "
                    "another daemon's trace)");
    });
  }
  return absl::OkStatus();
}

void KinetoBridge::Disconnect(PeerId peer, absl::string_view reason) {
  Forget(peer, /*clean=*/false, std::string(reason));
}

absl::Time KinetoBridge::EarliestStart(PeerId peer, absl::Time now) {
  const Process* process = Find(peer);
  if (process == nullptr) return now;
  // The config goes out with the next poll; kineto then refuses a start
  // closer than its warm-up.
  const absl::Time next_poll = std::max(now, process->last_seen + process->period);
  const absl::Duration jitter = std::max(kStartMargin, process->period / 10);
  return next_poll + jitter + kControllerTick + absl::Seconds(options_.warmup_secs);
}

std::string KinetoBridge::Deliver(Process& process) {
  Capture& capture = *process.capture;
  const absl::Time now = deps_.clock->Now();
  // A start kineto cannot warm up for would be dropped without a word:
  // open late instead, for the full window, and say so.
  const absl::Time earliest =
      now + kControllerTick + absl::Seconds(capture.config.warmup_secs) + kDeliveryMargin;
  if (capture.config.start < earliest) {
    capture.late = capture.config.iterations == 0;
    capture.config.start = earliest;
    if (capture.config.iterations == 0) capture.end = earliest + capture.config.duration;
  }
  absl::StatusOr<std::string> text = BuildConfigText(capture.config);
  if (!text.ok()) {
    ReportFailure(process, v1::CAPTURE_STATUS_FAILED, std::string(text.status().message()));
    return "";
  }
  capture.delivered = true;
  capture.delivered_at = now;
  LogInfo("kineto capture requested", {{"pid", process.host_pid},
                                       {"trace_id", capture.trace_id},
                                       {"late", capture.late ? "true" : "false"}});
  return *std::move(text);
}

void KinetoBridge::ReportStarted(Process& process) {
  Capture& capture = *process.capture;
  capture.started_reported = true;
  v1::ipc::CaptureStarted started;
  started.set_trace_id(capture.trace_id);
  const absl::Time opened =
      capture.config.iterations > 0 ? deps_.clock->Now() : capture.config.start;
  started.set_opened_at_unix_ns(absl::ToUnixNanos(opened));
  started.set_late_start(capture.late);
  deps_.core->OnCaptureStarted(process.peer, started);
}

std::string KinetoBridge::ExplainMissingResult(PeerId peer, absl::string_view trace_id) {
  const Process* process = Find(peer);
  if (process == nullptr || !process->capture.has_value() ||
      process->capture->trace_id != trace_id) {
    return "";
  }
  const Capture& capture = *process->capture;
  const absl::Time now = deps_.clock->Now();
  if (!capture.delivered) {
    return absl::StrCat("kineto has not polled for its config since the request (last poll ",
                        absl::FormatDuration(now - process->last_seen), " ago, every ",
                        absl::FormatDuration(process->period), ")");
  }
  const std::string taken = absl::StrCat("kineto took its config at a poll ",
                                         absl::FormatDuration(now - capture.delivered_at), " ago");
  if (!capture.started_reported) {
    return absl::StrCat(taken,
                        " but never reported its profiler active: it drops a start it cannot "
                        "warm up for, or its profiler was taken by the job's own torch.profiler");
  }
  return absl::StrCat(taken, " and recorded, but wrote no ",
                      WrittenFile(capture.config.log_file, process->own_pid),
                      " in the process's /tmp (KINETO_ONDEMAND_TRACE_DIR, or a /tmp it cannot "
                      "write, sends the file elsewhere)");
}

PickupRequest KinetoBridge::PickupFor(const Process& process) const {
  PickupRequest request;
  request.proc_root = options_.proc_root;
  request.host_pid = process.host_pid;
  request.start_time = process.start_time;
  request.uid = process.uid;
  request.path = WrittenFile(process.capture->config.log_file, process.own_pid);
  return request;
}

void KinetoBridge::Abandon(Process& process) {
  if (abandoned_.size() >= kMaxAbandoned) {
    LogWarning("kineto trace file of a cancelled capture left in place",
               {{"pid", process.host_pid},
                {"trace_id", process.capture->trace_id},
                {"reason", "too many cancelled captures waiting for their files"}});
    return;
  }
  Abandoned entry;
  entry.peer = process.peer;
  entry.pickup = PickupFor(process);
  entry.pickup.discard = true;
  entry.give_up = std::max(process.capture->end, deps_.clock->Now()) + kAbandonedWait;
  abandoned_.push_back(std::move(entry));
  ArmSweep();
}

void KinetoBridge::SweepAbandoned(absl::Time now) {
  for (size_t i = 0; i < abandoned_.size();) {
    Abandoned& entry = abandoned_[i];
    if (!entry.in_flight && (now >= entry.give_up || Find(entry.peer) == nullptr)) {
      if (now >= entry.give_up) {
        LogWarning("kineto trace file of a cancelled capture never appeared",
                   {{"pid", entry.pickup.host_pid}, {"path", entry.pickup.path}});
      }
      abandoned_.erase(abandoned_.begin() + static_cast<ptrdiff_t>(i));
      continue;
    }
    if (!entry.in_flight) {
      entry.in_flight = true;
      deps_.worker->Run([this, loop = deps_.loop, weak = std::weak_ptr<bool>(alive_),
                         request = entry.pickup]() mutable {
        const PickupResult result = PickUpKinetoTrace(request);
        loop->Post([this, weak = std::move(weak), path = request.path, pid = request.host_pid,
                    outcome = result.outcome] {
          if (!weak.expired()) OnAbandonedPickedUp(pid, path, outcome);
        });
      });
    }
    ++i;
  }
}

void KinetoBridge::OnAbandonedPickedUp(int32_t pid, const std::string& path,
                                       PickupResult::Outcome outcome) {
  auto it = std::find_if(abandoned_.begin(), abandoned_.end(), [&](const Abandoned& a) {
    return a.pickup.host_pid == pid && a.pickup.path == path;
  });
  if (it == abandoned_.end()) return;
  it->in_flight = false;
  if (outcome == PickupResult::Outcome::kNotYet) return;
  if (outcome == PickupResult::Outcome::kDone) {
    LogInfo("kineto trace file of a cancelled capture removed", {{"pid", pid}, {"path", path}});
  }
  abandoned_.erase(it);
}

void KinetoBridge::SchedulePickup(Process& process) {
  Capture& capture = *process.capture;
  if (capture.pickup_in_flight) return;
  capture.pickup_in_flight = true;
  PickupRequest request = PickupFor(process);
  auto total = trace_bytes_.find(capture.trace_id);
  const uint64_t used = total == trace_bytes_.end() ? 0 : total->second;
  request.max_bytes =
      std::min(options_.max_trace_bytes,
               options_.max_total_bytes > used ? options_.max_total_bytes - used : 0);
  request.tag = KinetoTraceTag{.trace_id = capture.trace_id,
                               .host = options_.hostname,
                               .rank = process.rank,
                               .pid = process.host_pid,
                               .job_id = process.job_id};
  request.gzip_level = options_.gzip_level;
  deps_.worker->Run([this, loop = deps_.loop, weak = std::weak_ptr<bool>(alive_),
                     peer = process.peer, trace_id = capture.trace_id,
                     request = std::move(request)]() mutable {
    PickupResult result = PickUpKinetoTrace(request);
    loop->Post([this, weak = std::move(weak), peer, trace_id = std::move(trace_id),
                result = std::move(result)]() mutable {
      if (!weak.expired()) OnPickedUp(peer, trace_id, std::move(result));
    });
  });
}

void KinetoBridge::OnPickedUp(PeerId peer, const std::string& trace_id, PickupResult result) {
  Process* process = Find(peer);
  if (process == nullptr || !process->capture.has_value() ||
      process->capture->trace_id != trace_id) {
    return;  // timed out, cancelled or gone meanwhile
  }
  process->capture->pickup_in_flight = false;
  using Outcome = PickupResult::Outcome;
  switch (result.outcome) {
    case Outcome::kNotYet:
      return;
    case Outcome::kGone:
      Forget(peer, /*clean=*/true, "the process exited before its trace file appeared");
      return;
    case Outcome::kRefused:
      ReportFailure(*process, v1::CAPTURE_STATUS_REJECTED, std::move(result.message));
      return;
    case Outcome::kFailed:
      ReportFailure(*process, v1::CAPTURE_STATUS_FAILED, std::move(result.message));
      return;
    case Outcome::kDone:
      ReportDone(*process, std::move(result));
      return;
  }
}

void KinetoBridge::ReportFailure(Process& process, v1::CaptureStatus status, std::string message) {
  v1::ipc::CaptureResult result;
  result.set_trace_id(process.capture->trace_id);
  result.set_status(status);
  result.set_message(std::move(message));
  process.capture.reset();
  deps_.core->OnCaptureResult(process.peer, result, nullptr);
}

void KinetoBridge::ReportDone(Process& process, PickupResult picked) {
  Capture& capture = *process.capture;
  const KinetoTraceSummary& summary = picked.converted.summary;
  if (!summary.trace_id_in_file.empty() && summary.trace_id_in_file != capture.trace_id) {
    ReportFailure(process, v1::CAPTURE_STATUS_REJECTED,
                  absl::StrCat("the trace file carries trace id ",
                               summary.trace_id_in_file.substr(0, 64), ", not ", capture.trace_id));
    return;
  }
  // Pickups of one trace run side by side, each bounded by what was left
  // when it was scheduled; the total is settled here, one file at a time.
  auto total = trace_bytes_.find(capture.trace_id);
  const uint64_t used = total == trace_bytes_.end() ? 0 : total->second;
  if (picked.source_bytes > options_.max_total_bytes - std::min(used, options_.max_total_bytes)) {
    ReportFailure(
        process, v1::CAPTURE_STATUS_REJECTED,
        absl::StrCat("the trace file's ", picked.source_bytes,
                     " bytes would take this trace's kineto files past ", options_.max_total_bytes,
                     " bytes (kineto.max_total_bytes); ", used, " bytes are stored already"));
    return;
  }
  if (!capture.started_reported) ReportStarted(process);
  // Traces are short-lived: forgetting old totals only forgets finished ones.
  if (trace_bytes_.size() >= kMaxTraceTotals) trace_bytes_.clear();
  trace_bytes_[capture.trace_id] += picked.source_bytes;
  v1::ipc::CaptureResult result;
  result.set_trace_id(capture.trace_id);
  result.set_status(v1::CAPTURE_STATUS_OK);
  result.set_event_count(summary.event_count);
  result.set_payload_size(picked.converted.gzip.size());
  result.set_late_start(capture.late);
  // When kineto really recorded: its profiler span, else what was asked
  // (a time window) or the span of its events (iterations).
  if (summary.window_start_unix_ns != 0) {
    result.set_window_start_unix_ns(summary.window_start_unix_ns);
    result.set_window_end_unix_ns(summary.window_end_unix_ns);
  } else if (capture.config.iterations == 0) {
    result.set_window_start_unix_ns(absl::ToUnixNanos(capture.config.start));
    result.set_window_end_unix_ns(
        absl::ToUnixNanos(capture.config.start + capture.config.duration));
  } else {
    result.set_window_start_unix_ns(summary.first_ts_unix_ns);
    result.set_window_end_unix_ns(summary.last_ts_unix_ns);
  }
  if (capture.config.iterations > 0) {
    // What kineto recorded, not what was asked: it stops on its own thread
    // (a step late on a busy host), and a process that has counted no
    // optimizer step takes the time fallback instead (none).
    result.set_steps(
        static_cast<uint32_t>(std::min<uint64_t>(summary.optimizer_steps, UINT32_MAX)));
    if (summary.optimizer_steps != static_cast<uint64_t>(capture.config.iterations)) {
      LogInfo("kineto recorded other than the steps asked",
              {{"pid", process.host_pid},
               {"trace_id", capture.trace_id},
               {"asked", capture.config.iterations},
               {"recorded", summary.optimizer_steps},
               {"time_fallback", summary.optimizer_steps == 0 ? "true" : "false"}});
    }
  }
  auto payload = std::make_unique<PreparedPayload>(
      std::move(picked.converted.gzip),
      PreparedTrace{.event_count = summary.event_count, .source_bytes = picked.source_bytes});
  const PeerId peer = process.peer;
  process.capture.reset();
  // The file is kineto's last step: its profiler is free again, though the
  // last heartbeat, sent during the window, said busy.
  process.idle = true;
  deps_.core->OnCaptureResult(peer, result, std::move(payload));
}

}  // namespace gpuctl::daemon::kineto
