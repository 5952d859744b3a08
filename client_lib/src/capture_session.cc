#include "client_lib/src/capture_session.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "client_lib/src/activities.h"

namespace gpuctl::client {
namespace {

wire::CaptureResult MakeResult(const std::string& trace_id, wire::CaptureStatus status,
                               std::string message) {
  wire::CaptureResult result;
  result.trace_id = trace_id;
  result.status = static_cast<int32_t>(status);
  result.message = std::move(message);
  return result;
}

}  // namespace

CaptureSession::CaptureSession(Clock* clock, std::vector<ActivitySource*> sources,
                               CaptureOutput* output)
    : clock_(clock), sources_(std::move(sources)), output_(output) {}

bool CaptureSession::Reject(const wire::StartCapture& request, wire::CaptureStatus status,
                            const std::string& message) {
  return output_->SendResult(MakeResult(request.trace_id, status, message), nullptr);
}

bool CaptureSession::OnStartCapture(const wire::StartCapture& request) {
  if (state_ != State::kIdle) {
    return Reject(request, wire::CaptureStatus::kBusy,
                  "busy: capture " + trace_id_ + " in progress");
  }
  const int64_t now = clock_->RealtimeNs();
  if (request.trace_id.empty() || request.trace_id.size() > kMaxTraceIdBytes) {
    return Reject(request, wire::CaptureStatus::kRejected, "invalid trace id length");
  }
  if (request.duration_ns <= 0 || request.duration_ns > kMaxDurationNs) {
    return Reject(request, wire::CaptureStatus::kRejected,
                  "duration_ns must be in (0, " + std::to_string(kMaxDurationNs) + "]");
  }
  if (request.start_time_unix_ns > now + kMaxStartAheadNs) {
    return Reject(request, wire::CaptureStatus::kRejected, "start time more than 1h ahead");
  }
  uint64_t cap = request.max_buffer_bytes;
  if (max_payload_bytes_ != 0 && (cap == 0 || cap > max_payload_bytes_)) cap = max_payload_bytes_;
  CaptureRequest prepared{request.trace_id, cap, 0, request.activity_buffer_bytes};
  std::string unknown;
  if (!ParseActivities(request.activities, &prepared.activities, &unknown)) {
    return Reject(request, wire::CaptureStatus::kRejected,
                  "unknown activity \"" + unknown + "\" (known: " + KnownActivityNames() + ")");
  }
  if (prepared.activity_buffer_bytes > kMaxActivityBufferBytes) {
    return Reject(request, wire::CaptureStatus::kRejected,
                  "activity_buffer_bytes above " + std::to_string(kMaxActivityBufferBytes));
  }
  for (size_t i = 0; i < sources_.size(); ++i) {
    PrepareError error;
    if (!sources_[i]->Prepare(prepared, &error)) {
      for (size_t j = 0; j <= i; ++j) sources_[j]->Abort();
      return Reject(request, error.status, error.message);
    }
  }
  trace_id_ = request.trace_id;
  start_ns_ = request.start_time_unix_ns;
  duration_ns_ = request.duration_ns;
  state_ = State::kPending;
  return OnTimer();
}

bool CaptureSession::OnCancelCapture(const wire::CancelCapture& cancel) {
  if (state_ == State::kIdle || cancel.trace_id != trace_id_) return true;
  const std::string trace_id = trace_id_;
  Abort();
  return output_->SendResult(
      MakeResult(trace_id, wire::CaptureStatus::kFailed, "cancelled: " + cancel.reason), nullptr);
}

bool CaptureSession::OnTimer() {
  const int64_t now = clock_->RealtimeNs();
  if (state_ == State::kPending && now >= start_ns_) {
    if (!OpenWindow(now)) return false;
  }
  if (state_ == State::kOpen && now >= opened_ns_ + duration_ns_) return CloseWindow(now);
  return true;
}

int CaptureSession::TimeoutMs() {
  int64_t deadline;
  if (state_ == State::kPending) {
    deadline = start_ns_;
  } else if (state_ == State::kOpen) {
    deadline = opened_ns_ + duration_ns_;
  } else {
    return -1;
  }
  const int64_t left_ns = std::max<int64_t>(0, deadline - clock_->RealtimeNs());
  return static_cast<int>(std::min<int64_t>((left_ns + 999'999) / 1'000'000, 60'000));
}

bool CaptureSession::OpenWindow(int64_t now) {
  opened_ns_ = now;
  for (ActivitySource* source : sources_) source->Start(now);
  state_ = State::kOpen;
  wire::CaptureStarted started;
  started.trace_id = trace_id_;
  started.opened_at_unix_ns = now;
  if (!output_->SendStarted(started)) {
    Abort();
    return false;
  }
  return true;
}

bool CaptureSession::CloseWindow(int64_t now) {
  for (ActivitySource* source : sources_) source->Stop(now);
  RecordWriter writer;
  uint64_t dropped = 0;
  uint64_t cupti_dropped = 0;
  bool host_only = false;
  std::string message;
  for (ActivitySource* source : sources_) {
    CollectStats stats = source->Collect(writer);
    dropped += stats.dropped_events;
    cupti_dropped += stats.cupti_dropped;
    host_only = host_only || stats.host_only;
    if (!stats.message.empty()) message += (message.empty() ? "" : "; ") + stats.message;
  }
  const uint64_t events = writer.event_count();
  std::string payload = writer.Finish(PayloadHeaderInfo{dropped, opened_ns_, now, getpid()});
  const std::string trace_id = trace_id_;
  state_ = State::kIdle;
  trace_id_.clear();
  if (max_payload_bytes_ != 0 && payload.size() > max_payload_bytes_) {
    return output_->SendResult(MakeResult(trace_id, wire::CaptureStatus::kFailed,
                                          "payload of " + std::to_string(payload.size()) +
                                              " bytes exceeds the daemon's limit of " +
                                              std::to_string(max_payload_bytes_)),
                               nullptr);
  }
  wire::CaptureResult result = MakeResult(trace_id, wire::CaptureStatus::kOk, std::move(message));
  result.host_only = host_only;
  result.cupti_dropped_records = cupti_dropped;
  result.event_count = events;
  result.dropped_events = dropped;
  result.window_start_unix_ns = opened_ns_;
  result.window_end_unix_ns = now;
  return output_->SendResult(result, &payload);
}

void CaptureSession::Abort() {
  if (state_ == State::kIdle) return;
  for (ActivitySource* source : sources_) source->Abort();
  state_ = State::kIdle;
  trace_id_.clear();
}

}  // namespace gpuctl::client
