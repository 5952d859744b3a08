// The capture state machine of one connection. Transport-free: it reports
// through CaptureOutput and reads time from the injected Clock.
//
// Time windows (StartCapture.iterations == 0):
//   idle -> pending (prepared; armed kArmLeadNs before the start instant)
//        -> open -> idle
// Arming starts the sources with the start instant as their window start:
// they record from then on and drop (or clip) what lies before the
// instant, so the window opens at the instant to the nanosecond however
// late the agent thread then gets a CPU, and every process of a trace
// covers the same stretch. Opened within max_start_skew of the instant
// (armed in time, or late but within the skew), the window ends at start +
// duration; opened later (the process was stopped, the request came late),
// it runs the full duration from its opening and the result says
// late_start.
//
// Iteration windows (iterations N > 0):
//   idle -> watching -> open -> closing -> idle
// Watching sets kGateStepWatch so every step mark reaches OnStepMarked. The
// mark of a step s in [start_step, start_step + N) opens the window on the
// marking thread, before that step's work is issued; the mark of
// start_step + N closes it there (the host source stops first, so that
// mark is not in the trace) and the agent thread finishes the rest. The
// watch ends at the bound, start_time + duration.
//
// Threads: everything runs on the agent thread except OnStepMarked, which
// application threads call from the step slow path. Both take `mu_`. The
// application side never sends and never does I/O: it opens the window
// (the sources' Start) or ends it (StopRecording) and wakes the agent
// thread (CaptureOutput::Wake), which sends CaptureStarted and finishes
// the capture. While an application thread may drive the sources (watching,
// open iteration window) the agent thread touches them only under `mu_`;
// once it has moved the state to finishing they are its own.
#ifndef GPUCTL_CLIENT_LIB_SRC_CAPTURE_SESSION_H_
#define GPUCTL_CLIENT_LIB_SRC_CAPTURE_SESSION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client_lib/src/activity_source.h"
#include "client_lib/src/annotation_state.h"
#include "client_lib/src/clock.h"
#include "client_lib/src/mutex.h"
#include "client_lib/src/wire/ipc_messages.h"

namespace gpuctl::client {

class CaptureOutput {
 public:
  virtual ~CaptureOutput() = default;
  // Agent thread. Each returns false when the connection failed; the
  // session then drops the capture.
  virtual bool SendStarted(const wire::CaptureStarted& started) = 0;
  virtual bool SendResult(const wire::CaptureResult& result, const std::string* payload) = 0;
  // Application thread, session lock held: makes the agent thread call
  // OnTimer soon. Must not block.
  virtual void Wake() = 0;
};

// "250ms", "1.5s", "12us": a duration for messages.
std::string DurationText(int64_t ns);

class CaptureSession {
 public:
  static constexpr size_t kMaxTraceIdBytes = 256;
  static constexpr int64_t kMaxDurationNs = 3600LL * 1'000'000'000;
  static constexpr int64_t kMaxStartAheadNs = 3600LL * 1'000'000'000;
  static constexpr int64_t kMaxStartSkewNs = 3600LL * 1'000'000'000;
  static constexpr int64_t kDefaultMaxStartSkewNs = 50'000'000;
  // How long before a time window's start instant the sources are armed.
  // Longer than a busy host takes to give the agent thread a CPU (64
  // processes on two cores: a few milliseconds) and than CUPTI takes to
  // enable its activity kinds; what is recorded meanwhile is dropped at
  // collection.
  static constexpr int64_t kArmLeadNs = 20'000'000;
  static constexpr uint64_t kMaxActivityBufferBytes = 256ull << 20;

  // Everything must outlive the session.
  CaptureSession(Clock* clock, AnnotationState* state, std::vector<ActivitySource*> sources,
                 CaptureOutput* output);
  ~CaptureSession() { Abort(); }
  CaptureSession(const CaptureSession&) = delete;
  CaptureSession& operator=(const CaptureSession&) = delete;

  // Largest payload the daemon takes (HelloAck.max_payload_bytes; 0: none).
  void set_max_payload_bytes(uint64_t bytes) { max_payload_bytes_ = bytes; }

  // Agent thread. Each returns false when sending failed (the capture is
  // then dropped and the caller should drop the connection).
  bool OnStartCapture(const wire::StartCapture& request);
  bool OnCancelCapture(const wire::CancelCapture& cancel);
  // Does what is due: opens or closes a time window, sends CaptureStarted
  // for a window an application thread opened, finishes a window at its
  // end, closing mark or bound.
  bool OnTimer();
  // CLOCK_REALTIME instant at which OnTimer has work, to the nanosecond
  // (the start instant is met with a nanosecond timer, not a rounded
  // millisecond); in the past when work is due now; nullopt when nothing
  // is timed.
  std::optional<int64_t> DeadlineNs();
  bool idle();

  // Application thread, while kGateStepWatch is set: the mark of `step`
  // made at `now_ns` (counters already updated), before it is recorded.
  void OnStepMarked(uint64_t step, int64_t now_ns);

  // Agent thread: stops any capture and frees its records without
  // reporting.
  void Abort();

 private:
  enum class State { kIdle, kPending, kWatching, kOpen, kClosing, kFinishing };

  // How a capture ends, decided under mu_ and carried out by the agent
  // thread without it.
  struct Ending {
    wire::CaptureResult result;  // status, message, window start, steps
    bool collect = true;         // false: no payload, the sources aborted
    int64_t end_ns = 0;          // window end when collecting
  };

  bool Reject(const wire::StartCapture& request, wire::CaptureStatus status,
              const std::string& message);
  // Checks the request; "" when valid, else why not.
  std::string Validate(const wire::StartCapture& request, int64_t now) const;
  // Prepares every source; false (sources aborted) with `error` on failure.
  bool PrepareSources(const wire::StartCapture& request, PrepareError* error);
  // Starts the sources of a pending time window at its start instant.
  void ArmLocked() GPUCTL_REQUIRES(mu_);
  void OpenLocked(int64_t now) GPUCTL_REQUIRES(mu_);
  void EndOnApplicationThreadLocked(Ending ending) GPUCTL_REQUIRES(mu_);
  // The ending due now, if any; the state moves to kFinishing.
  std::optional<Ending> DueEndingLocked(int64_t now) GPUCTL_REQUIRES(mu_);
  Ending BoundTimeoutLocked() GPUCTL_REQUIRES(mu_);
  Ending EndOfWindowLocked(int64_t now) GPUCTL_REQUIRES(mu_);
  // Agent thread, state kFinishing: stops, collects and sends.
  bool Finish(Ending ending);
  void AbortLocked() GPUCTL_REQUIRES(mu_);
  void Reset();
  void ResetLocked() GPUCTL_REQUIRES(mu_);

  Clock* const clock_;
  AnnotationState* const annotations_;
  const std::vector<ActivitySource*> sources_;
  CaptureOutput* const output_;
  uint64_t max_payload_bytes_ = 0;  // agent thread only

  Mutex mu_;
  State state_ GPUCTL_GUARDED_BY(mu_) = State::kIdle;
  std::string trace_id_ GPUCTL_GUARDED_BY(mu_);
  int64_t start_ns_ GPUCTL_GUARDED_BY(mu_) = 0;  // requested start
  int64_t duration_ns_ GPUCTL_GUARDED_BY(mu_) = 0;
  int64_t max_skew_ns_ GPUCTL_GUARDED_BY(mu_) = 0;
  int64_t end_ns_ GPUCTL_GUARDED_BY(mu_) = 0;     // planned end or bound
  int64_t opened_ns_ GPUCTL_GUARDED_BY(mu_) = 0;  // actual open instant
  bool late_start_ GPUCTL_GUARDED_BY(mu_) = false;
  bool armed_ GPUCTL_GUARDED_BY(mu_) = false;           // sources started at start_ns_
  bool started_unsent_ GPUCTL_GUARDED_BY(mu_) = false;  // CaptureStarted is due
  uint64_t start_step_ GPUCTL_GUARDED_BY(mu_) = 0;
  uint32_t iterations_ GPUCTL_GUARDED_BY(mu_) = 0;  // 0: time window
  uint64_t first_step_ GPUCTL_GUARDED_BY(mu_) = 0;
  uint64_t last_step_ GPUCTL_GUARDED_BY(mu_) = 0;  // last mark inside the window
  // Decided on an application thread.
  std::optional<Ending> app_ending_ GPUCTL_GUARDED_BY(mu_);
};

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_CAPTURE_SESSION_H_
