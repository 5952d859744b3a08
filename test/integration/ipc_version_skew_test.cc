// Replays the committed IPC fixtures (test/fixtures/ipc/, made by
// client_lib/src/wire/ipc_fixtures_test.cc) against a running daemon: a
// 1.0 library and a newer 1.3 one (fields and a message kind this daemon
// does not know) attach and deliver a trace; a 2.0 library is refused with
// both versions named. Each fixture is sent byte for byte; where the test
// must put its own values (its pid, the payload's size) a second copy of
// the message follows in the same datagram holding just those fields,
// which protobuf merges into the first.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "daemon/convert/testing/payload_builder.h"
#include "daemon/ipc/testing/ipc_test_client.h"
#include "daemon/runtime/daemon_main.h"
#include "gpuctl/v1/service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::gpuctl::daemon::testing::IpcTestClient;

constexpr char kFixtureTraceId[] = "0190d3a4-5b6c-7d8e-9f00-00000000c0de";

std::string Fixture(const std::string& name) {
  std::ifstream f(std::string(GPUCTL_IPC_FIXTURE_DIR) + "/" + name, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  EXPECT_FALSE(s.str().empty()) << name;
  return s.str();
}

class VersionSkewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuctl-skew-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    DaemonOptions options;
    options.listen_address = "127.0.0.1:0";
    options.socket_path = dir_ + "/run/gpuctl.sock";
    options.store_dir = dir_ + "/traces";
    options.start_delay = absl::ZeroDuration();
    auto daemon = Daemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    socket_path_ = options.socket_path;
    stub_ = v1::Gpuctl::NewStub(
        grpc::CreateChannel(daemon_->grpc_address(), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (daemon_ != nullptr) daemon_->Shutdown();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Sends `prefix`'s Hello fixture with this process's pid merged in.
  absl::StatusOr<v1::ipc::DaemonMessage> Hello(IpcTestClient& client, const std::string& prefix) {
    v1::ipc::ClientMessage pid;
    pid.mutable_hello()->set_pid(getpid());
    if (auto s = client.SendRaw(Fixture(prefix + "_hello.bin") + pid.SerializeAsString());
        !s.ok()) {
      return s;
    }
    return client.Receive();
  }

  // Attaches with `prefix`'s fixtures, takes a trace of this process and
  // answers it with the fixtures' CaptureStarted and CaptureResult.
  void AttachAndTrace(const std::string& prefix) {
    auto client = IpcTestClient::Connect(socket_path_);
    ASSERT_TRUE(client.ok()) << client.status();
    auto ack = Hello(*client, prefix);
    ASSERT_TRUE(ack.ok()) << ack.status();
    ASSERT_TRUE(ack->has_hello_ack()) << ack->DebugString();

    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::TraceRequest request;
    request.mutable_selector()->add_pids(getpid());
    request.mutable_duration()->set_nanos(50'000'000);
    request.set_trace_id(kFixtureTraceId);
    auto reader = stub_->Trace(&ctx, request);

    auto start = client->Receive();
    ASSERT_TRUE(start.ok()) << start.status();
    ASSERT_TRUE(start->has_start_capture()) << start->DebugString();
    ASSERT_EQ(start->start_capture().trace_id(), kFixtureTraceId);
    const int64_t window_start = start->start_capture().start_time_unix_ns();
    const int64_t window_end = window_start + start->start_capture().duration_ns();
    ASSERT_TRUE(client->SendRaw(Fixture(prefix + "_capture_started.bin")).ok());
    if (prefix == "minor3") {
      ASSERT_TRUE(client->SendRaw(Fixture("minor3_unknown_message.bin")).ok());
    }

    gpuctl::testing::PayloadBuilder builder(getpid(), window_start, window_end);
    builder.AddRange(1, window_start + 1000, window_start + 2000, "step", 0, 1);
    const std::vector<uint8_t> payload = builder.Build();
    v1::ipc::ClientMessage sizes;
    sizes.mutable_capture_result()->set_payload_size(payload.size());
    sizes.mutable_capture_result()->set_event_count(builder.event_count());
    ASSERT_TRUE(
        client->SendRaw(Fixture(prefix + "_capture_result.bin") + sizes.SerializeAsString()).ok());
    v1::ipc::ClientMessage chunk;
    chunk.mutable_payload_chunk()->set_trace_id(kFixtureTraceId);
    chunk.mutable_payload_chunk()->set_data(payload.data(), payload.size());
    ASSERT_TRUE(client->Send(chunk).ok());

    v1::TraceEvent event;
    bool completed = false;
    int results = 0;
    while (reader->Read(&event)) {
      if (event.has_result()) {
        ++results;
        EXPECT_EQ(event.result().pid(), getpid());
        EXPECT_EQ(event.result().status(), v1::CAPTURE_STATUS_OK) << event.result().message();
      }
      completed |= event.has_completed();
    }
    grpc::Status status = reader->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(results, 1);
    EXPECT_TRUE(completed);
    ASSERT_TRUE(client->SendRaw(Fixture(prefix + "_goodbye.bin")).ok());
  }

  std::string dir_;
  std::string socket_path_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<v1::Gpuctl::Stub> stub_;
};

TEST_F(VersionSkewTest, AnOlderMinorLibraryAttachesAndTraces) { AttachAndTrace("minor0"); }

TEST_F(VersionSkewTest, ANewerMinorLibraryAttachesAndTracesItsUnknownFieldsSkipped) {
  AttachAndTrace("minor3");
}

TEST_F(VersionSkewTest, AnotherMajorIsRejectedNamingBothVersions) {
  auto client = IpcTestClient::Connect(socket_path_);
  ASSERT_TRUE(client.ok()) << client.status();
  auto reply = Hello(*client, "major2");
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_TRUE(reply->has_hello_rejected()) << reply->DebugString();
  const v1::ipc::HelloRejected& rejected = reply->hello_rejected();
  EXPECT_EQ(rejected.reason(), v1::ipc::REJECT_REASON_PROTOCOL_VERSION);
  EXPECT_EQ(rejected.message(), absl::StrCat("client speaks IPC protocol 2.0, daemon speaks ",
                                             kIpcProtocolMajor, ".", kIpcProtocolMinor));
  EXPECT_EQ(rejected.protocol_major(), kIpcProtocolMajor);
  EXPECT_TRUE(client->WaitForClose());

  // And it is listed among the refused attachments.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::ListProcessesRequest request;
  request.set_include_rejected(true);
  v1::ListProcessesResponse response;
  ASSERT_TRUE(stub_->ListProcesses(&ctx, request, &response).ok());
  EXPECT_EQ(response.processes_size(), 0);
  ASSERT_EQ(response.rejected_size(), 1);
  EXPECT_EQ(response.rejected(0).pid(), getpid());
  EXPECT_EQ(response.rejected(0).uid(), getuid());
  EXPECT_EQ(response.rejected(0).reason(), rejected.message());
  EXPECT_EQ(response.rejected(0).job_id(), "skew");
}

}  // namespace
}  // namespace gpuctl::daemon
