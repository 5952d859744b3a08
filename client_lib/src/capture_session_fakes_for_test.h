// Test doubles for driving CaptureSession directly: a settable clock, an
// output that records what would be sent, and a source that records calls.
#ifndef GPUCTL_CLIENT_LIB_SRC_CAPTURE_SESSION_FAKES_FOR_TEST_H_
#define GPUCTL_CLIENT_LIB_SRC_CAPTURE_SESSION_FAKES_FOR_TEST_H_

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "client_lib/src/capture_session.h"

namespace gpuctl::client::testing {

class FakeClock final : public Clock {
 public:
  int64_t RealtimeNs() override { return now; }
  int64_t MonotonicNs() override { return now; }
  int64_t now = 1'000'000'000'000;
};

// Thread-safe: Wake comes from application threads.
class RecordingOutput final : public CaptureOutput {
 public:
  bool SendStarted(const wire::CaptureStarted& s) override {
    std::lock_guard lock(mu);
    started.push_back(s);
    cv.notify_all();
    return ok;
  }
  bool SendResult(const wire::CaptureResult& r, const std::string* payload) override {
    std::lock_guard lock(mu);
    results.push_back(r);
    payloads.push_back(payload != nullptr ? *payload : "");
    cv.notify_all();
    return ok;
  }
  void Wake() override {
    std::lock_guard lock(mu);
    ++wakes;
    cv.notify_all();
  }
  std::mutex mu;
  std::condition_variable cv;
  bool ok = true;
  int wakes = 0;
  std::vector<wire::CaptureStarted> started;
  std::vector<wire::CaptureResult> results;
  std::vector<std::string> payloads;
};

class FakeSource final : public ActivitySource {
 public:
  bool Prepare(const CaptureRequest& r, PrepareError* error) override {
    request = r;
    ++prepares;
    error->status = prepare_status;
    error->message = "no device";
    return prepare_ok;
  }
  void Start(int64_t ts) override { started_at = ts; }
  void StopRecording(int64_t ts) override { recording_stopped_at = ts; }
  void Stop(int64_t ts) override { stopped_at = ts; }
  CollectStats Collect(RecordWriter& w) override {
    w.AddStep(1, started_at, 5);
    CollectStats stats;
    stats.dropped_events = 3;
    stats.cupti_dropped = 2;
    stats.host_only = collect_host_only;
    stats.message = collect_message;
    return stats;
  }
  void Abort() override { ++aborts; }
  bool prepare_ok = true;
  wire::CaptureStatus prepare_status = wire::CaptureStatus::kFailed;
  bool collect_host_only = false;
  std::string collect_message;
  CaptureRequest request;
  int prepares = 0;
  int64_t started_at = 0, recording_stopped_at = 0, stopped_at = 0;
  int aborts = 0;
};

inline wire::CaptureStatus StatusOf(const wire::CaptureResult& r) {
  return static_cast<wire::CaptureStatus>(r.status);
}

}  // namespace gpuctl::client::testing

#endif  // GPUCTL_CLIENT_LIB_SRC_CAPTURE_SESSION_FAKES_FOR_TEST_H_
