#include "daemon/ipc/ipc_server.h"

#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "daemon/common/log.h"
#include "daemon/common/mutex.h"
#include "daemon/common/testing/notification.h"
#include "daemon/ipc/testing/ipc_test_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::gpuctl::daemon::testing::IpcTestClient;
using ::gpuctl::daemon::testing::kTestDeadline;
using ::gpuctl::testing::Notification;
using ::testing::_;
using ::testing::AllOf;
using ::testing::AtMost;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::Property;
using ::testing::Return;

class IpcServerTest : public testing::IpcServerFixture {
 protected:
  void SetUp() override {
    IpcServerFixture::SetUp();
    StartServer(IpcServerOptions{});
  }
  IpcTestClient Connect() {
    auto client = IpcTestClient::Connect(socket_path_);
    EXPECT_TRUE(client.ok()) << client.status();
    return std::move(*client);
  }
  // Expects the peer to be dropped with a reason containing `reason`.
  template <typename IdMatcher>
  void ExpectGone(IdMatcher id, bool clean, absl::string_view reason, Notification* gone) {
    EXPECT_CALL(core_, OnPeerGone(id, clean, HasSubstr(std::string(reason)))).WillOnce([gone] {
      gone->Notify();
    });
  }
  // The test ends with the client still connected; whether the server sees
  // its close before tear-down is a race the test does not care about.
  // Like every expectation here, it is set before the traffic that may
  // trigger it: gmock's expectation list is unlocked, and a send or a posted
  // task is what orders it before the loop thread's call (close() does not,
  // for ThreadSanitizer).
  void AllowGone(PeerId id) { EXPECT_CALL(core_, OnPeerGone(id, _, _)).Times(AtMost(1)); }
};

TEST_F(IpcServerTest, HelloIsRoutedWithKernelCredentialsAndAcknowledged) {
  IpcTestClient client = Connect();
  EXPECT_CALL(core_, OnPeerHello(_,
                                 AllOf(Field(&PeerCredentials::pid, getpid()),
                                       Field(&PeerCredentials::uid, getuid()),
                                       Field(&PeerCredentials::gid, getgid())),
                                 AllOf(Property(&v1::ipc::Hello::pid, getpid()),
                                       Property(&v1::ipc::Hello::job_id, "job-7")),
                                 ::testing::IsNull()))
      .WillOnce(Return(absl::OkStatus()));
  Notification gone;
  ExpectGone(_, false, "", &gone);
  ASSERT_TRUE(client.SendHello().ok());
  auto ack = client.Receive();
  ASSERT_TRUE(ack.ok()) << ack.status();
  ASSERT_TRUE(ack->has_hello_ack());
  EXPECT_EQ(ack->hello_ack().protocol_major(), 1u);
  EXPECT_EQ(ack->hello_ack().protocol_minor(), kIpcProtocolMinor);
  EXPECT_EQ(ack->hello_ack().daemon_version(), "9.9.9-test");
  EXPECT_EQ(ack->hello_ack().max_payload_bytes(), IpcServerOptions{}.max_payload_bytes);
  client.Close();
  ASSERT_TRUE(gone.WaitForNotificationWithTimeout(kTestDeadline));
}

TEST_F(IpcServerTest, RefusedHelloIsAnsweredWithHelloRejectedThenClosed) {
  IpcTestClient client = Connect();
  EXPECT_CALL(core_, OnPeerHello(_, _, _, _))
      .WillOnce(Return(absl::PermissionDeniedError("pid 1 does not match the socket's pid")));
  ASSERT_TRUE(client.SendHello().ok());
  // The core never accepted the peer, so it hears nothing more of it.
  EXPECT_CALL(core_, OnPeerGone(_, _, _)).Times(0);
  auto reply = client.Receive();
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_TRUE(reply->has_hello_rejected());
  EXPECT_FALSE(reply->has_hello_ack());
  EXPECT_EQ(reply->hello_rejected().reason(), v1::ipc::REJECT_REASON_PERMISSION_DENIED);
  EXPECT_EQ(reply->hello_rejected().message(), "pid 1 does not match the socket's pid");
  EXPECT_TRUE(client.WaitForClose());
}

TEST_F(IpcServerTest, OversizeDatagramDropsOnlyThatPeer) {
  IpcTestClient bad = Connect();
  IpcTestClient good = Connect();
  PeerId bad_id = ConnectAndHello(&bad);
  PeerId good_id = ConnectAndHello(&good);
  Notification gone;
  ExpectGone(bad_id, false, "larger than 65536", &gone);
  ASSERT_TRUE(bad.SendRaw(std::string(kMaxIpcMessageBytes + 1, 'x')).ok());
  EXPECT_TRUE(bad.WaitForClose());
  ASSERT_TRUE(gone.WaitForNotificationWithTimeout(kTestDeadline));

  Notification started;
  EXPECT_CALL(core_, OnCaptureStarted(good_id, Property(&v1::ipc::CaptureStarted::trace_id, "t1")))
      .WillOnce([&] { started.Notify(); });
  AllowGone(good_id);
  v1::ipc::ClientMessage msg;
  msg.mutable_capture_started()->set_trace_id("t1");
  ASSERT_TRUE(good.Send(msg).ok());
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kTestDeadline));
}

TEST_F(IpcServerTest, MaximumSizeDatagramIsAccepted) {
  IpcTestClient client = Connect();
  PeerId id = ConnectAndHello(&client);
  v1::ipc::ClientMessage msg;
  size_t length = kMaxIpcMessageBytes - 16;
  msg.mutable_goodbye()->set_reason(std::string(length, 'p'));
  while (msg.ByteSizeLong() < kMaxIpcMessageBytes) {
    msg.mutable_goodbye()->set_reason(std::string(++length, 'p'));
  }
  ASSERT_EQ(msg.ByteSizeLong(), kMaxIpcMessageBytes);
  Notification gone;
  ExpectGone(id, true, "Goodbye", &gone);
  ASSERT_TRUE(client.Send(msg).ok());
  client.Close();
  ASSERT_TRUE(gone.WaitForNotificationWithTimeout(kTestDeadline));
}

TEST_F(IpcServerTest, GarbageBytesDropThePeer) {
  IpcTestClient client = Connect();
  PeerId id = ConnectAndHello(&client);
  Notification gone;
  ExpectGone(id, false, "malformed", &gone);
  ASSERT_TRUE(client.SendRaw(std::string("\xff\xff\xff\xff\x0f", 5)).ok());
  EXPECT_TRUE(client.WaitForClose());
  ASSERT_TRUE(gone.WaitForNotificationWithTimeout(kTestDeadline));
}

TEST_F(IpcServerTest, FirstMessageMustBeHello) {
  IpcTestClient client = Connect();
  v1::ipc::ClientMessage msg;
  msg.mutable_capture_started()->set_trace_id("t1");
  ASSERT_TRUE(client.Send(msg).ok());
  EXPECT_TRUE(client.WaitForClose());
}

TEST_F(IpcServerTest, DuplicateHelloDropsThePeer) {
  IpcTestClient client = Connect();
  PeerId id = ConnectAndHello(&client);
  Notification gone;
  ExpectGone(id, false, "duplicate Hello", &gone);
  ASSERT_TRUE(client.SendHello().ok());
  EXPECT_TRUE(client.WaitForClose());
  ASSERT_TRUE(gone.WaitForNotificationWithTimeout(kTestDeadline));
}

TEST_F(IpcServerTest, GoodbyeThenCloseIsClean) {
  IpcTestClient client = Connect();
  PeerId id = ConnectAndHello(&client);
  Notification gone;
  ExpectGone(id, true, "", &gone);
  v1::ipc::ClientMessage msg;
  msg.mutable_goodbye()->set_reason("process exit");
  ASSERT_TRUE(client.Send(msg).ok());
  client.Close();
  ASSERT_TRUE(gone.WaitForNotificationWithTimeout(kTestDeadline));
}

TEST_F(IpcServerTest, AbruptCloseIsNotClean) {
  IpcTestClient client = Connect();
  PeerId id = ConnectAndHello(&client);
  Notification gone;
  ExpectGone(id, false, "connection closed", &gone);
  // Nothing is sent after the expectation, and the kernel's ordering of
  // close() before the hang-up is invisible to ThreadSanitizer: pass the
  // expectation to the loop thread through a task instead.
  RunOnLoop([] {});
  client.Close();
  ASSERT_TRUE(gone.WaitForNotificationWithTimeout(kTestDeadline));
}

// What a preloaded shell execs on its way exits as soon as it said Hello:
// an ordinary end, not a warning in the daemon's log.
TEST_F(IpcServerTest, AProcessGoneBeforeHelloAckClosesQuietly) {
  std::vector<std::string> warnings;
  Mutex mu;
  SetLogSinkForTesting([&](absl::string_view line) {
    MutexLock lock(&mu);
    if (absl::StrContains(line, "level=warn")) warnings.emplace_back(line);
  });
  IpcTestClient client = Connect();
  Notification gone;
  ExpectGone(_, false, "closed its connection", &gone);
  // The process is gone by the time the daemon answers its Hello.
  EXPECT_CALL(core_, OnPeerHello(_, _, _, _)).WillOnce([&client] {
    client.Close();
    return absl::OkStatus();
  });
  ASSERT_TRUE(client.SendHello().ok());
  ASSERT_TRUE(gone.WaitForNotificationWithTimeout(kTestDeadline));
  RunOnLoop([] {});
  SetLogSinkForTesting(nullptr);
  MutexLock lock(&mu);
  EXPECT_THAT(warnings, ::testing::IsEmpty());
}

TEST_F(IpcServerTest, SendReachesTheClient) {
  IpcTestClient client = Connect();
  PeerId id = ConnectAndHello(&client);
  AllowGone(id);
  v1::ipc::DaemonMessage msg;
  msg.mutable_start_capture()->set_trace_id("trace-1");
  msg.mutable_start_capture()->set_duration_ns(5'000'000'000);
  absl::Status sent;
  RunOnLoop([&] { sent = server_->Send(id, msg); });
  ASSERT_TRUE(sent.ok()) << sent;
  auto got = client.Receive();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->start_capture().trace_id(), "trace-1");
  EXPECT_EQ(got->start_capture().duration_ns(), 5'000'000'000);
  RunOnLoop([&] { EXPECT_TRUE(absl::IsNotFound(server_->Send(id + 100, msg))); });
}

TEST_F(IpcServerTest, SendToAStuckPeerDropsItInsteadOfBlocking) {
  IpcTestClient client = Connect();
  PeerId id = ConnectAndHello(&client);
  Notification gone;
  ExpectGone(id, false, "buffer is full", &gone);
  v1::ipc::DaemonMessage msg;
  msg.mutable_cancel_capture()->set_reason(std::string(4096, 'r'));
  absl::Status last;
  // The client never reads: its queue fills and Send must fail, not block.
  RunOnLoop([&] {
    for (int i = 0; i < 100000 && last.ok(); ++i) last = server_->Send(id, msg);
  });
  EXPECT_TRUE(absl::IsUnavailable(last)) << last;
  ASSERT_TRUE(gone.WaitForNotificationWithTimeout(kTestDeadline));
  RunOnLoop([&] { EXPECT_EQ(server_->peer_count(), 0u); });
}

TEST_F(IpcServerTest, DisconnectClosesAndNotifiesTheCoreLater) {
  IpcTestClient client = Connect();
  PeerId id = ConnectAndHello(&client);
  Notification gone;
  std::atomic<bool> inside_disconnect{false};
  EXPECT_CALL(core_, OnPeerGone(id, false, absl::string_view("policy"))).WillOnce([&] {
    EXPECT_FALSE(inside_disconnect.load());
    gone.Notify();
  });
  RunOnLoop([&] {
    inside_disconnect = true;
    server_->Disconnect(id, "policy");
    inside_disconnect = false;
  });
  EXPECT_TRUE(client.WaitForClose());
  ASSERT_TRUE(gone.WaitForNotificationWithTimeout(kTestDeadline));
}

TEST_F(IpcServerTest, UnknownMessageTypeIsSkipped) {
  IpcTestClient client = Connect();
  PeerId id = ConnectAndHello(&client);
  AllowGone(id);
  // Field 99 (a future message): parses as an empty ClientMessage.
  ASSERT_TRUE(client.SendRaw(std::string("\x9a\x06\x00", 3)).ok());
  Notification started;
  EXPECT_CALL(core_, OnCaptureStarted(id, _)).WillOnce([&] { started.Notify(); });
  v1::ipc::ClientMessage msg;
  msg.mutable_capture_started()->set_trace_id("t");
  ASSERT_TRUE(client.Send(msg).ok());
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kTestDeadline));
}

class IpcServerHelloDeadlineTest : public testing::IpcServerFixture {};

TEST_F(IpcServerHelloDeadlineTest, SilentConnectionIsDroppedAfterTheDeadline) {
  IpcServerOptions options;
  options.hello_timeout = absl::Milliseconds(50);
  StartServer(options);
  auto client = IpcTestClient::Connect(socket_path_);
  ASSERT_TRUE(client.ok());
  EXPECT_TRUE(client->WaitForClose());
  RunOnLoop([&] { EXPECT_EQ(server_->peer_count(), 0u); });
}

}  // namespace
}  // namespace gpuctl::daemon
