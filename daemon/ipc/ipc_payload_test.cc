// The IPC server's handling of capture payloads and received descriptors.
#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "daemon/common/testing/notification.h"
#include "daemon/ipc/ipc_server.h"
#include "daemon/ipc/testing/ipc_test_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::gpuctl::daemon::testing::IpcTestClient;
using ::gpuctl::daemon::testing::kTestDeadline;
using ::gpuctl::daemon::testing::MakeMemfd;
using ::gpuctl::testing::Notification;
using ::testing::_;
using ::testing::HasSubstr;

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + 7) & 0xff);
  return s;
}

v1::ipc::ClientMessage Result(v1::ipc::PayloadTransport transport, uint64_t size) {
  v1::ipc::ClientMessage msg;
  v1::ipc::CaptureResult* r = msg.mutable_capture_result();
  r->set_trace_id("trace-1");
  r->set_status(v1::CAPTURE_STATUS_OK);
  r->set_transport(transport);
  r->set_payload_size(size);
  r->set_event_count(42);
  return msg;
}

v1::ipc::ClientMessage Chunk(uint64_t offset, const std::string& data,
                             const std::string& trace_id = "trace-1") {
  v1::ipc::ClientMessage msg;
  msg.mutable_payload_chunk()->set_trace_id(trace_id);
  msg.mutable_payload_chunk()->set_offset(offset);
  msg.mutable_payload_chunk()->set_data(data);
  return msg;
}

class IpcPayloadTest : public testing::IpcServerFixture {
 protected:
  void SetUp() override {
    IpcServerFixture::SetUp();
    IpcServerOptions options;
    options.max_payload_bytes = 1 << 20;
    StartServer(options);
    auto client = IpcTestClient::Connect(socket_path_);
    ASSERT_TRUE(client.ok()) << client.status();
    client_.emplace(std::move(*client));
    id_ = ConnectAndHello(&*client_);
  }
  // Expects one result and records its bytes (or that it had none).
  void ExpectResult() {
    EXPECT_CALL(core_, OnCaptureResult(id_, _, _))
        .WillOnce([this](PeerId, const v1::ipc::CaptureResult& r, std::unique_ptr<Payload> p) {
          EXPECT_EQ(r.trace_id(), "trace-1");
          EXPECT_EQ(r.event_count(), 42u);
          had_payload_ = p != nullptr;
          if (p != nullptr) received_.assign(p->bytes().begin(), p->bytes().end());
          delivered_.Notify();
        });
  }
  // Sends `msg` (with `fds`) and expects the peer to be dropped for `reason`.
  void ExpectDropped(const v1::ipc::ClientMessage& msg, std::vector<int> fds,
                     absl::string_view reason) {
    Notification gone;
    EXPECT_CALL(core_, OnPeerGone(id_, false, HasSubstr(std::string(reason)))).WillOnce([&] {
      gone.Notify();
    });
    ASSERT_TRUE(client_->Send(msg, std::move(fds)).ok());
    EXPECT_TRUE(client_->WaitForClose());
    ASSERT_TRUE(gone.WaitForNotificationWithTimeout(kTestDeadline));
  }
  void AllowGone() { EXPECT_CALL(core_, OnPeerGone(id_, _, _)).Times(::testing::AtMost(1)); }

  std::optional<IpcTestClient> client_;
  PeerId id_ = 0;
  Notification delivered_;
  bool had_payload_ = false;
  std::string received_;
};

TEST_F(IpcPayloadTest, SealedMemfdIsDeliveredWithItsBytes) {
  std::string bytes = Pattern(300000);
  ExpectResult();
  ASSERT_TRUE(
      client_->Send(Result(v1::ipc::PAYLOAD_TRANSPORT_MEMFD, bytes.size()), {MakeMemfd(bytes)})
          .ok());
  ASSERT_TRUE(delivered_.WaitForNotificationWithTimeout(kTestDeadline));
  EXPECT_TRUE(had_payload_);
  EXPECT_EQ(received_, bytes);
  AllowGone();
}

TEST_F(IpcPayloadTest, EmptySealedMemfdIsDelivered) {
  ExpectResult();
  ASSERT_TRUE(client_->Send(Result(v1::ipc::PAYLOAD_TRANSPORT_MEMFD, 0), {MakeMemfd("")}).ok());
  ASSERT_TRUE(delivered_.WaitForNotificationWithTimeout(kTestDeadline));
  EXPECT_TRUE(had_payload_);
  EXPECT_EQ(received_, "");
  AllowGone();
}

TEST_F(IpcPayloadTest, UnsealedMemfdIsRefused) {
  std::string bytes = Pattern(100);
  ExpectDropped(Result(v1::ipc::PAYLOAD_TRANSPORT_MEMFD, bytes.size()),
                {MakeMemfd(bytes, /*seal=*/false)}, "not sealed");
}

TEST_F(IpcPayloadTest, MemfdOfTheWrongSizeIsRefused) {
  ExpectDropped(Result(v1::ipc::PAYLOAD_TRANSPORT_MEMFD, 101), {MakeMemfd(Pattern(100))},
                "holds 100 bytes");
}

TEST_F(IpcPayloadTest, MemfdOverTheLimitIsRefused) {
  ExpectDropped(Result(v1::ipc::PAYLOAD_TRANSPORT_MEMFD, (1 << 20) + 1), {MakeMemfd("x")},
                "exceeds the limit");
}

TEST_F(IpcPayloadTest, RegularFileIsRefused) {
  std::string path = dir_ + "/payload.bin";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "abcd", 4), 4);
  ExpectDropped(Result(v1::ipc::PAYLOAD_TRANSPORT_MEMFD, 4), {fd}, "seal");
}

TEST_F(IpcPayloadTest, PipeIsRefused) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  close(p[1]);
  ExpectDropped(Result(v1::ipc::PAYLOAD_TRANSPORT_MEMFD, 0), {p[0]}, "not a regular file");
}

TEST_F(IpcPayloadTest, MemfdResultWithoutDescriptorIsRefused) {
  ExpectDropped(Result(v1::ipc::PAYLOAD_TRANSPORT_MEMFD, 10), {}, "without a file descriptor");
}

TEST_F(IpcPayloadTest, TwoDescriptorsAreRefused) {
  ExpectDropped(Result(v1::ipc::PAYLOAD_TRANSPORT_MEMFD, 1), {MakeMemfd("a"), MakeMemfd("b")},
                "more than one file descriptor");
}

TEST_F(IpcPayloadTest, ManyDescriptorsAreRefusedAndNoneLeaks) {
  ExpectDropped(Result(v1::ipc::PAYLOAD_TRANSPORT_MEMFD, 1),
                {MakeMemfd("a"), MakeMemfd("b"), MakeMemfd("c"), MakeMemfd("d")},
                "more than one file descriptor");
}

TEST_F(IpcPayloadTest, DescriptorOnAnotherMessageIsRefused) {
  v1::ipc::ClientMessage msg;
  msg.mutable_capture_started()->set_trace_id("trace-1");
  ExpectDropped(msg, {MakeMemfd("abc")}, "unexpected file descriptor on CaptureStarted");
}

TEST_F(IpcPayloadTest, DescriptorOnInlineResultIsRefused) {
  ExpectDropped(Result(v1::ipc::PAYLOAD_TRANSPORT_INLINE, 3), {MakeMemfd("abc")},
                "unexpected file descriptor on CaptureResult");
}

TEST_F(IpcPayloadTest, InlineChunksAreReassembled) {
  std::string bytes = Pattern(150000);
  {
    // Each chunk but the last is reported as it arrives, then the result.
    ::testing::InSequence order;
    for (uint64_t received : {60000, 120000}) {
      EXPECT_CALL(core_, OnPayloadProgress(id_, _, received))
          .WillOnce([](PeerId, const v1::ipc::CaptureResult& r, uint64_t) {
            EXPECT_EQ(r.payload_size(), 150000u);
            EXPECT_EQ(r.event_count(), 42u);
          });
    }
    ExpectResult();
  }
  ASSERT_TRUE(client_->Send(Result(v1::ipc::PAYLOAD_TRANSPORT_INLINE, bytes.size())).ok());
  constexpr size_t kChunk = 60000;
  for (size_t off = 0; off < bytes.size(); off += kChunk) {
    ASSERT_TRUE(client_->Send(Chunk(off, bytes.substr(off, kChunk))).ok());
  }
  ASSERT_TRUE(delivered_.WaitForNotificationWithTimeout(kTestDeadline));
  EXPECT_TRUE(had_payload_);
  EXPECT_EQ(received_, bytes);
  AllowGone();
}

TEST_F(IpcPayloadTest, OutOfOrderChunkDropsThePeer) {
  ASSERT_TRUE(client_->Send(Result(v1::ipc::PAYLOAD_TRANSPORT_INLINE, 200)).ok());
  ASSERT_TRUE(client_->Send(Chunk(0, Pattern(100))).ok());
  ExpectDropped(Chunk(150, Pattern(50)), {}, "offset 150, expected 100");
}

TEST_F(IpcPayloadTest, ChunkPastTheAnnouncedSizeDropsThePeer) {
  ASSERT_TRUE(client_->Send(Result(v1::ipc::PAYLOAD_TRANSPORT_INLINE, 100)).ok());
  ExpectDropped(Chunk(0, Pattern(101)), {}, "does not fit");
}

TEST_F(IpcPayloadTest, ChunkForAnotherTraceDropsThePeer) {
  ASSERT_TRUE(client_->Send(Result(v1::ipc::PAYLOAD_TRANSPORT_INLINE, 100)).ok());
  ExpectDropped(Chunk(0, Pattern(100), "trace-2"), {}, "another trace");
}

TEST_F(IpcPayloadTest, ChunkWithoutResultDropsThePeer) {
  ExpectDropped(Chunk(0, Pattern(10)), {}, "without an inline CaptureResult");
}

TEST_F(IpcPayloadTest, InlineResultOverTheLimitDropsThePeer) {
  ExpectDropped(Result(v1::ipc::PAYLOAD_TRANSPORT_INLINE, (1 << 20) + 1), {}, "exceeds the limit");
}

TEST_F(IpcPayloadTest, ResultWithoutPayloadHasNullPayload) {
  ExpectResult();
  ASSERT_TRUE(client_->Send(Result(v1::ipc::PAYLOAD_TRANSPORT_NONE, 0)).ok());
  ASSERT_TRUE(delivered_.WaitForNotificationWithTimeout(kTestDeadline));
  EXPECT_FALSE(had_payload_);
  AllowGone();
}

TEST_F(IpcPayloadTest, UnknownTransportDropsThePeer) {
  ExpectDropped(Result(static_cast<v1::ipc::PayloadTransport>(7), 0), {}, "unknown payload");
}

}  // namespace
}  // namespace gpuctl::daemon
