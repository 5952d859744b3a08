// The capture state machine of one connection: idle -> pending (prepared,
// waiting for the start instant) -> open (recording) -> result sent -> idle.
// Transport-free: it reports through CaptureOutput and reads time from the
// injected Clock. Agent thread only.
#ifndef GPUCTL_CLIENT_LIB_SRC_CAPTURE_SESSION_H_
#define GPUCTL_CLIENT_LIB_SRC_CAPTURE_SESSION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "client_lib/src/activity_source.h"
#include "client_lib/src/clock.h"
#include "client_lib/src/wire/ipc_messages.h"

namespace gpuctl::client {

class CaptureOutput {
 public:
  virtual ~CaptureOutput() = default;
  // Each returns false when the connection failed; the session then drops
  // the capture.
  virtual bool SendStarted(const wire::CaptureStarted& started) = 0;
  virtual bool SendResult(const wire::CaptureResult& result, const std::string* payload) = 0;
};

class CaptureSession {
 public:
  static constexpr size_t kMaxTraceIdBytes = 256;
  static constexpr int64_t kMaxDurationNs = 3600LL * 1'000'000'000;
  static constexpr int64_t kMaxStartAheadNs = 3600LL * 1'000'000'000;
  static constexpr uint64_t kMaxActivityBufferBytes = 256ull << 20;

  // `sources` and everything else must outlive the session.
  CaptureSession(Clock* clock, std::vector<ActivitySource*> sources, CaptureOutput* output);
  ~CaptureSession() { Abort(); }

  // Largest payload the daemon takes (HelloAck.max_payload_bytes; 0: none).
  void set_max_payload_bytes(uint64_t bytes) { max_payload_bytes_ = bytes; }

  // Each returns false when sending failed (the capture is then dropped
  // and the caller should drop the connection).
  bool OnStartCapture(const wire::StartCapture& request);
  bool OnCancelCapture(const wire::CancelCapture& cancel);
  // Opens or closes the window when its instant has come.
  bool OnTimer();

  // Milliseconds until OnTimer has work, rounded up; -1 when idle.
  int TimeoutMs();
  bool idle() const { return state_ == State::kIdle; }
  const std::string& trace_id() const { return trace_id_; }

  // Stops any capture and frees its records without reporting.
  void Abort();

 private:
  enum class State { kIdle, kPending, kOpen };

  bool Reject(const wire::StartCapture& request, wire::CaptureStatus status,
              const std::string& message);
  bool OpenWindow(int64_t now);
  bool CloseWindow(int64_t now);

  Clock* const clock_;
  const std::vector<ActivitySource*> sources_;
  CaptureOutput* const output_;
  uint64_t max_payload_bytes_ = 0;

  State state_ = State::kIdle;
  std::string trace_id_;
  int64_t start_ns_ = 0;  // requested start
  int64_t duration_ns_ = 0;
  int64_t opened_ns_ = 0;  // actual open instant
};

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_CAPTURE_SESSION_H_
