#ifndef GPUCTL_DAEMON_CORE_TESTING_TRACE_TEST_FIXTURE_H_
#define GPUCTL_DAEMON_CORE_TESTING_TRACE_TEST_FIXTURE_H_

// Test-only: DaemonCoreTest with helpers for start instants, iteration
// windows and selection.

#include <memory>
#include <string>
#include <vector>

#include "daemon/core/proto_time.h"
#include "daemon/core/testing/core_test_fixture.h"

namespace gpuctl::daemon {

inline google::protobuf::Timestamp Ts(absl::Time t) { return ToProtoTimestamp(t); }
inline google::protobuf::Duration Dur(absl::Duration d) { return ToProtoDuration(d); }
inline absl::Time FromTs(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}
inline absl::Duration FromDur(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

class TraceTest : public DaemonCoreTest {
 protected:
  v1::TraceRequest JobRequest(const std::string& job, absl::Duration d) {
    v1::TraceRequest req;
    req.mutable_selector()->set_job_id(job);
    *req.mutable_duration() = Dur(d);
    return req;
  }
  // The message of StartTrace's refusal of `req`, which must be
  // INVALID_ARGUMENT.
  std::string Refused(const v1::TraceRequest& req) {
    absl::Status st = core_->StartTrace(req, std::make_shared<RecordingObserver>()).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    return std::string(st.message());
  }
  const v1::TraceStarted& Started(const RecordingObserver& obs) {
    EXPECT_FALSE(obs.events.empty());
    EXPECT_TRUE(obs.events[0].has_started());
    return obs.events[0].started();
  }
  void SendCaptureResult(PeerId peer, v1::ipc::CaptureResult result, std::vector<uint8_t> bytes) {
    result.set_status(v1::CAPTURE_STATUS_OK);
    result.set_transport(v1::ipc::PAYLOAD_TRANSPORT_MEMFD);
    result.set_payload_size(bytes.size());
    core_->OnCaptureResult(peer, result, std::make_unique<VectorPayload>(std::move(bytes)));
  }
  // A payload for a window of [start, end).
  std::vector<uint8_t> WindowPayload(int pid, int64_t start_ns, int64_t end_ns) {
    PayloadBuilder b(pid, start_ns, end_ns);
    b.AddThreadName(static_cast<uint32_t>(pid), "main");
    b.AddRange(static_cast<uint32_t>(pid), start_ns + 100, start_ns + 200, "fwd", 0, 1);
    return b.Build();
  }
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_TESTING_TRACE_TEST_FIXTURE_H_
