// Peers that poll (the kineto bridge's): a common start they can make, and
// results that arrive as finished trace files.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/core/testing/core_test_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

constexpr PeerId kLibrary = 1;
constexpr PeerId kKineto = kKinetoPeerBit | 1;

// A finished trace file as the bridge hands it over.
class PreparedBytes final : public Payload {
 public:
  explicit PreparedBytes(std::string bytes) : bytes_(std::move(bytes)) {}
  absl::Span<const uint8_t> bytes() const override {
    return {reinterpret_cast<const uint8_t*>(bytes_.data()), bytes_.size()};  // NOLINT
  }
  const PreparedTrace* prepared() const override { return &info_; }

 private:
  std::string bytes_;
  PreparedTrace info_{.event_count = 12, .source_bytes = 3456};
};

class PollingPeerTest : public DaemonCoreTest {};

TEST_F(PollingPeerTest, MixedSelectionStartsWhenThePollingPeerCan) {
  Attach(kLibrary, 100, "J", 0);
  Attach(kKineto, 200, "J", 1);
  peers_.SetStartDelay(kKineto, absl::Seconds(7));
  auto observer = std::make_shared<RecordingObserver>();
  const absl::Time asked = clock_.Now();
  ASSERT_TRUE(Trace("J", absl::Seconds(2), observer).ok());
  ASSERT_EQ(StartsTo(kLibrary).size(), 1u);
  ASSERT_EQ(StartsTo(kKineto).size(), 1u);
  // Both get the same instant, the one the polling peer can make.
  const int64_t start = StartsTo(kLibrary)[0].start_time_unix_ns();
  EXPECT_EQ(StartsTo(kKineto)[0].start_time_unix_ns(), start);
  EXPECT_EQ(absl::FromUnixNanos(start) - asked, absl::Seconds(7));
  const v1::TraceStarted& started = observer->events.front().started();
  EXPECT_EQ(started.start_time().seconds(), absl::ToUnixSeconds(absl::FromUnixNanos(start)));
  EXPECT_EQ(started.processes(1).kind(), v1::PROCESS_KIND_KINETO);
}

TEST_F(PollingPeerTest, KinetoOptionsReachOnlyKinetoPeers) {
  Attach(kLibrary, 100, "J", 0);
  Attach(kKineto, 200, "J", 1);
  v1::TraceRequest request;
  request.mutable_selector()->set_job_id("J");
  request.mutable_duration()->set_seconds(2);
  request.add_activities("kernel");
  request.add_kineto_options("with_stack");
  request.add_kineto_options("record_shapes");
  ASSERT_TRUE(core_->StartTrace(request, std::make_shared<RecordingObserver>()).ok());
  ASSERT_EQ(StartsTo(kLibrary).size(), 1u);
  EXPECT_THAT(StartsTo(kLibrary)[0].activities(), ::testing::ElementsAre("kernel"));
  ASSERT_EQ(StartsTo(kKineto).size(), 1u);
  EXPECT_THAT(StartsTo(kKineto)[0].activities(),
              ::testing::ElementsAre("kernel", "kineto.with_stack", "kineto.record_shapes"));
}

TEST_F(PollingPeerTest, UnknownOrRepeatedKinetoOptionFailsTheRequest) {
  Attach(kKineto, 200, "J", 1);
  for (const std::vector<std::string>& options :
       {std::vector<std::string>{"with_stacks"}, {"with_flops", "with_flops"}}) {
    v1::TraceRequest request;
    request.mutable_selector()->set_job_id("J");
    request.mutable_duration()->set_seconds(2);
    for (const std::string& o : options) request.add_kineto_options(o);
    absl::StatusOr<std::string> id =
        core_->StartTrace(request, std::make_shared<RecordingObserver>());
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << options[0];
  }
  EXPECT_TRUE(StartsTo(kKineto).empty());
}

TEST_F(PollingPeerTest, CallersOwnStartInstantIsKept) {
  Attach(kKineto, 200, "J", 1);
  peers_.SetStartDelay(kKineto, absl::Seconds(7));
  v1::TraceRequest request;
  request.mutable_selector()->set_job_id("J");
  request.mutable_duration()->set_seconds(2);
  const absl::Time start = clock_.Now() + absl::Seconds(1);
  request.mutable_start_time()->set_seconds(absl::ToUnixSeconds(start));
  ASSERT_TRUE(core_->StartTrace(request, std::make_shared<RecordingObserver>()).ok());
  ASSERT_EQ(StartsTo(kKineto).size(), 1u);
  EXPECT_EQ(StartsTo(kKineto)[0].start_time_unix_ns(), absl::ToUnixNanos(start));
}

TEST_F(PollingPeerTest, PreparedTraceIsStoredAsItIs) {
  Attach(kKineto, 200, "J", 1);
  auto observer = std::make_shared<RecordingObserver>();
  absl::StatusOr<std::string> id = Trace("J", absl::Seconds(1), observer);
  ASSERT_TRUE(id.ok());
  absl::StatusOr<std::string> gz = GzipCompress(R"({"traceEvents": []})");
  ASSERT_TRUE(gz.ok());
  v1::ipc::CaptureResult result;
  result.set_trace_id(*id);
  result.set_status(v1::CAPTURE_STATUS_OK);
  result.set_payload_size(gz->size());
  core_->OnCaptureResult(kKineto, result, std::make_unique<PreparedBytes>(*gz));
  RunAll();
  const v1::ProcessResult* out = observer->ResultFor(200);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->status(), v1::CAPTURE_STATUS_OK) << out->message();
  EXPECT_EQ(out->event_count(), 12u);
  EXPECT_EQ(out->payload_bytes(), 3456u);
  EXPECT_EQ(out->file(), "h1-rank1-pid200.json.gz");
  EXPECT_EQ(ReadTraceJson(*id, out->file())["traceEvents"].size(), 0u);
}

TEST_F(PollingPeerTest, RecordsPayloadFromALibraryIsNeverTakenAsPrepared) {
  Attach(kLibrary, 100, "J", 0);
  auto observer = std::make_shared<RecordingObserver>();
  absl::StatusOr<std::string> id = Trace("J", absl::Seconds(1), observer);
  ASSERT_TRUE(id.ok());
  // A gzip file sent as an ordinary payload is validated as records.
  absl::StatusOr<std::string> gz = GzipCompress(R"({"traceEvents": []})");
  SendResult(kLibrary, *id, std::vector<uint8_t>(gz->begin(), gz->end()));
  RunAll();
  ASSERT_NE(observer->ResultFor(100), nullptr);
  EXPECT_EQ(observer->ResultFor(100)->status(), v1::CAPTURE_STATUS_REJECTED);
}

TEST_F(PollingPeerTest, TheLibrarysHelloReplacesAKinetoRegistrationOfTheSameProcess) {
  // The heartbeat came first (kineto polls from its first profiler call),
  // then the library's Hello: one process, traced by the library.
  Attach(kKineto, 200, "J", 1);
  Attach(kKineto + 1, 300, "J", 2);
  Attach(kLibrary, 200, "J", 1);
  ASSERT_EQ(peers_.disconnected().size(), 1u);
  EXPECT_EQ(peers_.disconnected()[0].first, kKineto);
  EXPECT_THAT(peers_.disconnected()[0].second, ::testing::HasSubstr("libgpuctl.so"));
  // Another library process of another pid drops nothing.
  Attach(kLibrary + 1, 400, "J", 3);
  EXPECT_EQ(peers_.disconnected().size(), 1u);
}

}  // namespace
}  // namespace gpuctl::daemon
