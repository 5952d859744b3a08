// GPU activity through the core: the activities of a request, and CUPTI's
// capture info in results, manifests and stored traces.
#include <string>
#include <vector>

#include "daemon/common/trace_id.h"
#include "daemon/core/testing/core_test_fixture.h"
#include "gmock/gmock.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::TraceRequest Request(const std::string& job, const std::vector<std::string>& activities) {
  v1::TraceRequest req;
  req.mutable_selector()->set_job_id(job);
  req.mutable_duration()->set_seconds(1);
  for (const std::string& a : activities) req.add_activities(a);
  return req;
}

TEST_F(DaemonCoreTest, RejectsUnknownActivitiesListingValidOnes) {
  Attach(1, 100, "42", 0);
  auto obs = std::make_shared<RecordingObserver>();
  auto id = core_->StartTrace(Request("42", {"kernel", "kernels"}), obs);
  ASSERT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(id.status().message(),
            "unknown activity \"kernels\"; valid activities: kernel, memcpy, memset, runtime, "
            "driver, sync, nvtx, overhead, memory, cpu, sched");
  EXPECT_THAT(core_->StartTrace(Request("42", std::vector<std::string>(65, "kernel")), obs)
                  .status()
                  .message(),
              HasSubstr("more than 64 activities"));
  EXPECT_TRUE(peers_.sent().empty());
}

TEST_F(DaemonCoreTest, ActivitiesReachTheProcessAndTheManifest) {
  Attach(1, 100, "42", 0);
  Attach(2, 101, "43", 0);
  auto obs = std::make_shared<RecordingObserver>();
  auto id = core_->StartTrace(Request("42", {"kernel", "driver", "nvtx"}), obs);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(StartsTo(1).size(), 1u);
  EXPECT_THAT(StartsTo(1)[0].activities(), ElementsAre("kernel", "driver", "nvtx"));
  SendResult(1, *id, Payload(100, StartsTo(1)[0]));
  RunAll();
  auto manifest = store_->GetManifest(*id);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_THAT(manifest->activities(), ElementsAre("kernel", "driver", "nvtx"));

  // No list: the process applies its default set.
  auto other = core_->StartTrace(Request("43", {}), std::make_shared<RecordingObserver>());
  ASSERT_TRUE(other.ok());
  ASSERT_EQ(StartsTo(2).size(), 1u);
  EXPECT_TRUE(StartsTo(2)[0].activities().empty());
}

TEST_F(DaemonCoreTest, GpuPayloadIsConvertedWithCaptureInfo) {
  Attach(1, 100, "42", 0);
  auto obs = std::make_shared<RecordingObserver>();
  auto id = core_->StartTrace(Request("42", {}), obs);
  ASSERT_TRUE(id.ok());
  const v1::ipc::StartCapture start = StartsTo(1)[0];
  const int64_t s = start.start_time_unix_ns();
  PayloadBuilder b(100, s, s + start.duration_ns());
  b.AddDeviceInfo({.device = 0});
  b.AddApiCall({.correlation = 3, .tid = 100, .start_ns = s + 10, .end_ns = s + 20});
  b.AddKernel({.correlation = 3, .name = "gemm", .start_ns = s + 30, .end_ns = s + 90});
  b.AddCaptureInfo({.flags = records::kCaptureFlagCuptiActive, .dropped_by_cupti = 6});
  b.set_dropped_events(9);
  SendResult(1, *id, b.Build());
  RunAll();
  const v1::ProcessResult* r = obs->ResultFor(100);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status(), v1::CAPTURE_STATUS_OK) << r->message();
  EXPECT_EQ(r->dropped_events(), 9u);
  EXPECT_EQ(r->cupti_dropped_records(), 6u);
  EXPECT_FALSE(r->host_only());
  EXPECT_EQ(r->message(), "");
  nlohmann::json doc = ReadTraceJson(*id, r->file());
  EXPECT_EQ(doc["deviceProperties"].size(), 1u);
  EXPECT_EQ(doc["gpuctl"]["cupti_dropped_records"], 6);
  int kernels = 0, flows = 0;
  for (const auto& e : doc["traceEvents"]) {
    kernels += e.value("cat", "") == "kernel";
    flows += e.value("cat", "") == "ac2g";
  }
  EXPECT_EQ(kernels, 1);
  EXPECT_EQ(flows, 2);
  auto manifest = store_->GetManifest(*id);
  ASSERT_TRUE(manifest.ok());
  EXPECT_EQ(manifest->results(0).cupti_dropped_records(), 6u);
}

TEST_F(DaemonCoreTest, HostOnlyTracesSayWhy) {
  Attach(1, 100, "42", 0);
  Attach(2, 101, "42", 1);
  Attach(3, 102, "42", 1);
  auto obs = std::make_shared<RecordingObserver>();
  auto id = core_->StartTrace(Request("42", {}), obs);
  ASSERT_TRUE(id.ok());
  // From the payload's capture info (authoritative; bytes repaired to UTF-8).
  const v1::ipc::StartCapture start = StartsTo(1)[0];
  const int64_t s = start.start_time_unix_ns();
  PayloadBuilder b(100, s, s + start.duration_ns());
  b.AddCaptureInfo({.flags = records::kCaptureFlagHostOnly, .message = "no CUDA \xff loaded"});
  SendResult(1, *id, b.Build());
  // From the CaptureResult when the payload has no capture info.
  std::vector<uint8_t> bytes = Payload(101, start);
  v1::ipc::CaptureResult result;
  result.set_trace_id(*id);
  result.set_status(v1::CAPTURE_STATUS_OK);
  result.set_transport(v1::ipc::PAYLOAD_TRANSPORT_MEMFD);
  result.set_payload_size(bytes.size());
  result.set_host_only(true);
  result.set_cupti_dropped_records(4);
  core_->OnCaptureResult(2, result, std::make_unique<VectorPayload>(std::move(bytes)));
  // A failed capture keeps CUPTI's drop count.
  v1::ipc::CaptureResult failed;
  failed.set_trace_id(*id);
  failed.set_status(v1::CAPTURE_STATUS_FAILED);
  failed.set_message("flush failed");
  failed.set_cupti_dropped_records(8);
  core_->OnCaptureResult(3, failed, nullptr);
  RunAll();
  const v1::ProcessResult* from_payload = obs->ResultFor(100);
  ASSERT_NE(from_payload, nullptr);
  EXPECT_EQ(from_payload->status(), v1::CAPTURE_STATUS_OK);
  EXPECT_TRUE(from_payload->host_only());
  EXPECT_EQ(from_payload->message(), "host-only trace: no CUDA \xef\xbf\xbd loaded");
  const v1::ProcessResult* from_ipc = obs->ResultFor(101);
  ASSERT_NE(from_ipc, nullptr);
  EXPECT_TRUE(from_ipc->host_only());
  EXPECT_EQ(from_ipc->cupti_dropped_records(), 4u);
  const v1::ProcessResult* failed_result = obs->ResultFor(102);
  ASSERT_NE(failed_result, nullptr);
  EXPECT_EQ(failed_result->status(), v1::CAPTURE_STATUS_FAILED);
  EXPECT_EQ(failed_result->cupti_dropped_records(), 8u);
  // The manifest (protobuf JSON) stores the repaired message.
  auto manifest = store_->GetManifest(*id);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
}

}  // namespace
}  // namespace gpuctl::daemon
