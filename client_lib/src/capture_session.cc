#include "client_lib/src/capture_session.h"

#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
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

std::string Steps(uint64_t first, uint64_t last) {
  return std::to_string(first) + "-" + std::to_string(last);
}

void Append(std::string* message, const std::string& more) {
  if (more.empty()) return;
  if (!message->empty()) *message += "; ";
  *message += more;
}

}  // namespace

std::string DurationText(int64_t ns) {
  if (ns < 0) {
    return "-" + DurationText(ns == std::numeric_limits<int64_t>::min() ? -(ns + 1) : -ns);
  }
  struct Unit {
    int64_t ns;
    const char* name;
  };
  static constexpr Unit kUnits[] = {
      {1'000'000'000, "s"}, {1'000'000, "ms"}, {1'000, "us"}, {1, "ns"}};
  for (const Unit& unit : kUnits) {
    if (ns < unit.ns && unit.ns != 1) continue;
    char buf[64];
    snprintf(buf, sizeof(buf), "%.3f", static_cast<double>(ns) / static_cast<double>(unit.ns));
    std::string text = buf;
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
    return text + unit.name;
  }
  return "0ns";
}

CaptureSession::CaptureSession(Clock* clock, AnnotationState* annotations,
                               std::vector<ActivitySource*> sources, CaptureOutput* output)
    : clock_(clock), annotations_(annotations), sources_(std::move(sources)), output_(output) {}

bool CaptureSession::Reject(const wire::StartCapture& request, wire::CaptureStatus status,
                            const std::string& message) {
  return output_->SendResult(MakeResult(request.trace_id, status, message), nullptr);
}

std::string CaptureSession::Validate(const wire::StartCapture& request, int64_t now) const {
  if (request.trace_id.empty() || request.trace_id.size() > kMaxTraceIdBytes) {
    return "invalid trace id length";
  }
  if (request.duration_ns <= 0 || request.duration_ns > kMaxDurationNs) {
    return "duration_ns must be in (0, " + std::to_string(kMaxDurationNs) + "]";
  }
  if (request.start_time_unix_ns > now + kMaxStartAheadNs) return "start time more than 1h ahead";
  if (request.max_start_skew_ns < 0 || request.max_start_skew_ns > kMaxStartSkewNs) {
    return "max_start_skew_ns must be in [0, " + std::to_string(kMaxStartSkewNs) + "]";
  }
  if (request.iterations > 0 &&
      request.start_step > std::numeric_limits<uint64_t>::max() - request.iterations) {
    return "start_step + iterations is past the largest step number";
  }
  if (request.activity_buffer_bytes > kMaxActivityBufferBytes) {
    return "activity_buffer_bytes above " + std::to_string(kMaxActivityBufferBytes);
  }
  return {};
}

bool CaptureSession::PrepareSources(const wire::StartCapture& request, PrepareError* error) {
  uint64_t cap = request.max_buffer_bytes;
  if (max_payload_bytes_ != 0 && (cap == 0 || cap > max_payload_bytes_)) cap = max_payload_bytes_;
  CaptureRequest prepared{request.trace_id, cap, 0, request.activity_buffer_bytes};
  std::string unknown;
  if (!ParseActivities(request.activities, &prepared.activities, &unknown)) {
    error->status = wire::CaptureStatus::kRejected;
    error->message = "unknown activity \"" + unknown + "\" (known: " + KnownActivityNames() + ")";
    return false;
  }
  for (size_t i = 0; i < sources_.size(); ++i) {
    if (!sources_[i]->Prepare(prepared, error)) {
      for (size_t j = 0; j <= i; ++j) sources_[j]->Abort();
      return false;
    }
  }
  return true;
}

bool CaptureSession::OnStartCapture(const wire::StartCapture& request) {
  std::optional<std::string> busy_with;
  {
    MutexLock lock(&mu_);
    if (state_ != State::kIdle) busy_with = trace_id_;
  }
  if (busy_with.has_value()) {
    return Reject(request, wire::CaptureStatus::kBusy,
                  "busy: capture " + *busy_with + " in progress");
  }
  if (std::string invalid = Validate(request, clock_->RealtimeNs()); !invalid.empty()) {
    return Reject(request, wire::CaptureStatus::kRejected, invalid);
  }
  // Idle: no application thread touches the sources.
  PrepareError error;
  if (!PrepareSources(request, &error)) return Reject(request, error.status, error.message);

  std::string past;
  {
    MutexLock lock(&mu_);
    trace_id_ = request.trace_id;
    start_ns_ = request.start_time_unix_ns;
    duration_ns_ = request.duration_ns;
    max_skew_ns_ =
        request.max_start_skew_ns != 0 ? request.max_start_skew_ns : kDefaultMaxStartSkewNs;
    end_ns_ = start_ns_ + duration_ns_;
    iterations_ = request.iterations;
    start_step_ = request.start_step;
    state_ = iterations_ > 0 ? State::kWatching : State::kPending;
    if (iterations_ > 0) {
      // The watch bit goes up before the counter is read, so a later mark
      // reaches OnStepMarked (which waits for this lock). The step fast path
      // is relaxed: a mark racing with these two lines may escape both, and
      // the window then opens at the next step in range; the start step is
      // chosen steps ahead of every process, so that mark is not the one.
      annotations_->gate.fetch_or(kGateStepWatch, std::memory_order_seq_cst);
      uint64_t last = 0;
      if (LastMarkedStep(*annotations_, &last) && last >= start_step_) {
        past = "already at step " + std::to_string(last) + ", past the start step " +
               std::to_string(start_step_);
        AbortLocked();
      }
    }
  }
  if (!past.empty()) return Reject(request, wire::CaptureStatus::kFailed, past);
  return OnTimer();
}

bool CaptureSession::OnCancelCapture(const wire::CancelCapture& cancel) {
  std::string trace_id;
  {
    MutexLock lock(&mu_);
    if (state_ == State::kIdle || cancel.trace_id != trace_id_) return true;
    trace_id = trace_id_;
    AbortLocked();
  }
  return output_->SendResult(
      MakeResult(trace_id, wire::CaptureStatus::kFailed, "cancelled: " + cancel.reason), nullptr);
}

void CaptureSession::OnStepMarked(uint64_t step, int64_t now_ns) {
  MutexLock lock(&mu_);
  if (iterations_ == 0 || (state_ != State::kWatching && state_ != State::kOpen)) return;
  const uint64_t end_step = start_step_ + iterations_;
  if (state_ == State::kWatching) {
    if (step < start_step_) return;
    if (step < end_step) {
      first_step_ = step;
      last_step_ = step;
      OpenLocked(now_ns);
      output_->Wake();
      return;
    }
    // Numbered past the whole window (gpuctl_step_n skipping ahead): it
    // cannot open any more.
    Ending ending;
    ending.result = MakeResult(trace_id_, wire::CaptureStatus::kFailed,
                               "step " + std::to_string(step) + " was marked before any of steps " +
                                   Steps(start_step_, end_step - 1));
    ending.collect = false;
    EndOnApplicationThreadLocked(std::move(ending));
    return;
  }
  if (step < end_step) {
    last_step_ = std::max(last_step_, step);
    return;
  }
  // The closing mark: nothing from here on belongs to the window.
  for (ActivitySource* source : sources_) source->StopRecording(now_ns);
  Ending ending;
  ending.result = MakeResult(trace_id_, wire::CaptureStatus::kOk, "");
  ending.result.first_step = first_step_;
  ending.result.steps = static_cast<uint32_t>(end_step - first_step_);
  ending.end_ns = now_ns;
  EndOnApplicationThreadLocked(std::move(ending));
}

void CaptureSession::EndOnApplicationThreadLocked(Ending ending) {
  annotations_->gate.fetch_and(~kGateStepWatch, std::memory_order_relaxed);
  app_ending_ = std::move(ending);
  state_ = State::kClosing;
  output_->Wake();
}

void CaptureSession::ArmLocked() {
  for (ActivitySource* source : sources_) source->Start(start_ns_);
  armed_ = true;
}

void CaptureSession::OpenLocked(int64_t now) {
  if (armed_) {
    // Recording since the arming, clipped at the instant: the window opened
    // there, whenever this thread got to run.
    opened_ns_ = start_ns_;
  } else {
    opened_ns_ = now;
    for (ActivitySource* source : sources_) source->Start(now);
  }
  if (iterations_ == 0) {
    late_start_ = opened_ns_ > start_ns_ + max_skew_ns_;
    end_ns_ =
        late_start_ ? opened_ns_ + duration_ns_ : std::max(start_ns_ + duration_ns_, opened_ns_);
  }
  state_ = State::kOpen;
  started_unsent_ = true;
}

bool CaptureSession::OnTimer() {
  std::optional<wire::CaptureStarted> started;
  std::optional<Ending> ending;
  {
    MutexLock lock(&mu_);
    const int64_t now = clock_->RealtimeNs();
    if (state_ == State::kPending) {
      if (now >= start_ns_) {
        OpenLocked(now);
      } else if (!armed_ && now >= start_ns_ - kArmLeadNs) {
        ArmLocked();
      }
    }
    if (started_unsent_) {
      started_unsent_ = false;
      started.emplace();
      started->trace_id = trace_id_;
      started->opened_at_unix_ns = opened_ns_;
      started->first_step = iterations_ > 0 ? first_step_ : 0;
      started->late_start = late_start_;
    } else {
      ending = DueEndingLocked(now);
    }
  }
  if (started.has_value()) {
    if (!output_->SendStarted(*started)) {
      Abort();
      return false;
    }
    MutexLock lock(&mu_);
    ending = DueEndingLocked(clock_->RealtimeNs());
  }
  return !ending.has_value() || Finish(std::move(*ending));
}

std::optional<CaptureSession::Ending> CaptureSession::DueEndingLocked(int64_t now) {
  Ending ending;
  if (state_ == State::kClosing) {
    ending = std::move(*app_ending_);
    app_ending_.reset();
  } else if ((state_ == State::kOpen || state_ == State::kWatching) && now >= end_ns_) {
    ending = state_ == State::kWatching ? BoundTimeoutLocked() : EndOfWindowLocked(now);
  } else {
    return std::nullopt;
  }
  ending.result.window_start_unix_ns = ending.collect ? opened_ns_ : 0;
  annotations_->gate.fetch_and(~kGateStepWatch, std::memory_order_relaxed);
  state_ = State::kFinishing;
  return ending;
}

CaptureSession::Ending CaptureSession::BoundTimeoutLocked() {
  uint64_t last = 0;
  const std::string last_text =
      LastMarkedStep(*annotations_, &last) ? "last step " + std::to_string(last) : "no step marked";
  Ending ending;
  ending.result = MakeResult(trace_id_, wire::CaptureStatus::kTimedOut,
                             "did not reach step " + std::to_string(start_step_) + " within " +
                                 DurationText(duration_ns_) + " (" + last_text + ")");
  ending.collect = false;
  return ending;
}

CaptureSession::Ending CaptureSession::EndOfWindowLocked(int64_t now) {
  Ending ending;
  ending.result = MakeResult(trace_id_, wire::CaptureStatus::kOk, "");
  ending.end_ns = now;
  if (iterations_ > 0) {
    // The bound came first: the steps marked so far, the last one partly.
    ending.result.first_step = first_step_;
    ending.result.steps = static_cast<uint32_t>(last_step_ - first_step_ + 1);
    ending.result.message = "captured steps " + Steps(first_step_, last_step_) + " of " +
                            Steps(first_step_, start_step_ + iterations_ - 1) + " before the bound";
  } else if (late_start_) {
    ending.result.late_start = true;
    ending.result.message = "opened " + DurationText(opened_ns_ - start_ns_) +
                            " after the start instant, beyond the max start skew " +
                            DurationText(max_skew_ns_) + ": the window ran " +
                            DurationText(duration_ns_) + " from its opening";
  }
  return ending;
}

bool CaptureSession::Finish(Ending ending) {
  // State kFinishing: the sources are this thread's alone.
  wire::CaptureResult& result = ending.result;
  if (!ending.collect) {
    for (ActivitySource* source : sources_) source->Abort();
    Reset();
    return output_->SendResult(result, nullptr);
  }
  for (ActivitySource* source : sources_) source->Stop(ending.end_ns);
  RecordWriter writer;
  uint64_t dropped = 0;
  uint64_t cupti_dropped = 0;
  bool host_only = false;
  for (ActivitySource* source : sources_) {
    CollectStats stats = source->Collect(writer);
    dropped += stats.dropped_events;
    cupti_dropped += stats.cupti_dropped;
    host_only = host_only || stats.host_only;
    Append(&result.message, stats.message);
  }
  const uint64_t events = writer.event_count();
  std::string payload = writer.Finish(
      PayloadHeaderInfo{dropped, result.window_start_unix_ns, ending.end_ns, getpid()});
  Reset();
  if (max_payload_bytes_ != 0 && payload.size() > max_payload_bytes_) {
    return output_->SendResult(MakeResult(result.trace_id, wire::CaptureStatus::kFailed,
                                          "payload of " + std::to_string(payload.size()) +
                                              " bytes exceeds the daemon's limit of " +
                                              std::to_string(max_payload_bytes_)),
                               nullptr);
  }
  result.host_only = host_only;
  result.cupti_dropped_records = cupti_dropped;
  result.event_count = events;
  result.dropped_events = dropped;
  result.window_end_unix_ns = ending.end_ns;
  return output_->SendResult(result, &payload);
}

std::optional<int64_t> CaptureSession::DeadlineNs() {
  MutexLock lock(&mu_);
  if (started_unsent_ || state_ == State::kClosing) return std::numeric_limits<int64_t>::min();
  if (state_ == State::kPending) return armed_ ? start_ns_ : start_ns_ - kArmLeadNs;
  if (state_ == State::kOpen || state_ == State::kWatching) return end_ns_;
  return std::nullopt;
}

bool CaptureSession::idle() {
  MutexLock lock(&mu_);
  return state_ == State::kIdle;
}

void CaptureSession::Abort() {
  MutexLock lock(&mu_);
  AbortLocked();
}

void CaptureSession::AbortLocked() {
  if (state_ == State::kIdle) return;
  annotations_->gate.fetch_and(~kGateStepWatch, std::memory_order_relaxed);
  for (ActivitySource* source : sources_) source->Abort();
  ResetLocked();
}

void CaptureSession::Reset() {
  MutexLock lock(&mu_);
  ResetLocked();
}

void CaptureSession::ResetLocked() {
  state_ = State::kIdle;
  trace_id_.clear();
  started_unsent_ = false;
  late_start_ = false;
  armed_ = false;
  iterations_ = 0;
  app_ending_.reset();
}

}  // namespace gpuctl::client
