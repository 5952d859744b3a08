#ifndef GPUCTL_DAEMON_CORE_TESTING_MOCK_DAEMON_CORE_H_
#define GPUCTL_DAEMON_CORE_TESTING_MOCK_DAEMON_CORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "daemon/core/daemon_core.h"
#include "gmock/gmock.h"

namespace gpuctl::daemon {

// For adapter tests: the IPC server and the gRPC service are checked against
// the DaemonCore contract, not against the real core.
class MockDaemonCore : public DaemonCore {
 public:
  MOCK_METHOD(absl::Status, OnPeerHello,
              (PeerId peer, const PeerCredentials& creds, const v1::ipc::Hello& hello,
               std::unique_ptr<StepCounterView> steps),
              (override));
  MOCK_METHOD(void, OnHelloRefused,
              (const PeerCredentials& creds, const v1::ipc::Hello& hello,
               const absl::Status& status),
              (override));
  MOCK_METHOD(void, OnCaptureStarted, (PeerId peer, const v1::ipc::CaptureStarted& started),
              (override));
  MOCK_METHOD(void, OnCaptureResult,
              (PeerId peer, const v1::ipc::CaptureResult& result, std::unique_ptr<Payload> payload),
              (override));
  MOCK_METHOD(void, OnPayloadProgress,
              (PeerId peer, const v1::ipc::CaptureResult& result, uint64_t received), (override));
  MOCK_METHOD(void, OnPeerGone, (PeerId peer, bool clean, absl::string_view reason), (override));
  using DaemonCore::StartTrace;
  MOCK_METHOD(absl::StatusOr<std::string>, StartTrace,
              (const v1::TraceRequest& request, const v1::TraceTrigger& trigger,
               std::shared_ptr<TraceObserver> observer),
              (override));
  MOCK_METHOD(void, CancelTrace, (absl::string_view trace_id, v1::TraceCancellation why),
              (override));
  MOCK_METHOD(absl::StatusOr<v1::ListProcessesResponse>, ListProcesses,
              (const v1::ListProcessesRequest& request), (override));
  MOCK_METHOD(v1::GetStatusResponse, GetStatus, (), (override));
  MOCK_METHOD(CoreSnapshot, Snapshot, (), (override));
  void SetAttachListener(AttachListener /*listener*/) override {}

  // A real budget, since its accounting is what adapter tests check; no
  // cap unless one is set (before the IPC server starts).
  IngestAdmission& ingest() override { return *ingest_; }
  void SetIngestCap(uint64_t max_bytes) { ingest_ = std::make_unique<IngestAdmission>(max_bytes); }

 private:
  std::unique_ptr<IngestAdmission> ingest_ = std::make_unique<IngestAdmission>(0);
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_TESTING_MOCK_DAEMON_CORE_H_
