// The IPC server's resource bounds: the inline payload budget (backpressure
// instead of buffering every peer's payload) and the Hello rate limit.
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "daemon/common/testing/notification.h"
#include "daemon/ipc/ipc_server.h"
#include "daemon/ipc/testing/ipc_test_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::gpuctl::daemon::testing::IpcTestClient;
using ::gpuctl::daemon::testing::kTestDeadline;
using ::gpuctl::testing::Notification;
using ::testing::_;

constexpr uint64_t kBudget = 100000;
constexpr size_t kChunk = 40000;

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed) & 0xff);
  return s;
}

v1::ipc::ClientMessage InlineResult(uint64_t size) {
  v1::ipc::ClientMessage msg;
  v1::ipc::CaptureResult* r = msg.mutable_capture_result();
  r->set_trace_id("trace-1");
  r->set_status(v1::CAPTURE_STATUS_OK);
  r->set_transport(v1::ipc::PAYLOAD_TRANSPORT_INLINE);
  r->set_payload_size(size);
  return msg;
}

// Sends the CaptureResult and the chunks from `from` up to `to`.
void SendInline(IpcTestClient& client, const std::string& bytes, size_t from, size_t to,
                bool with_result = true) {
  if (with_result) {
    ASSERT_TRUE(client.Send(InlineResult(bytes.size())).ok());
  }
  for (size_t off = from; off < to; off += kChunk) {
    v1::ipc::ClientMessage msg;
    msg.mutable_payload_chunk()->set_trace_id("trace-1");
    msg.mutable_payload_chunk()->set_offset(off);
    msg.mutable_payload_chunk()->set_data(bytes.substr(off, std::min(kChunk, to - off)));
    ASSERT_TRUE(client.Send(msg).ok());
  }
}

class IpcInlineBudgetTest : public testing::IpcServerFixture {
 protected:
  void SetUp() override {
    IpcServerFixture::SetUp();
    IpcServerOptions options;
    options.max_payload_bytes = 1 << 20;
    core_.SetIngestCap(kBudget);
    StartServer(options);
  }
  void TearDown() override {
    // Payloads release their budget through the loop: drop them first.
    std::lock_guard lock(mu_);
    held_.clear();
    IpcServerFixture::TearDown();
  }

  IpcTestClient Attach(PeerId* id) {
    auto client = IpcTestClient::Connect(socket_path_);
    EXPECT_TRUE(client.ok()) << client.status();
    *id = ConnectAndHello(&*client);
    EXPECT_CALL(core_, OnPeerGone(*id, _, _)).Times(::testing::AtMost(1));
    return std::move(*client);
  }
  // The core keeps `peer`'s payload (as conversion would) until DropHeld.
  void ExpectKept(PeerId peer, Notification* delivered) {
    EXPECT_CALL(core_, OnCaptureResult(peer, _, _))
        .WillOnce([this, delivered](PeerId p, const v1::ipc::CaptureResult&,
                                    std::unique_ptr<Payload> payload) {
          std::lock_guard lock(mu_);
          received_[p].assign(payload->bytes().begin(), payload->bytes().end());
          held_.push_back(std::move(payload));
          delivered->Notify();
        });
  }
  void DropHeld() {
    std::lock_guard lock(mu_);
    held_.clear();
  }
  std::string Received(PeerId peer) {
    std::lock_guard lock(mu_);
    return received_[peer];
  }
  // The ingest budget's counters, read on the server's loop.
  std::pair<uint64_t, size_t> Budget() {
    std::pair<uint64_t, size_t> out;
    RunOnLoop([&] { out = {core_.ingest().running_bytes(), core_.ingest().waiting_count()}; });
    return out;
  }
  // Waits until the server's counters are `want`.
  bool WaitForBudget(std::pair<uint64_t, size_t> want) {
    const absl::Time deadline = absl::Now() + kTestDeadline;
    while (absl::Now() < deadline) {
      if (Budget() == want) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }

  std::mutex mu_;
  std::vector<std::unique_ptr<Payload>> held_;
  std::map<PeerId, std::string> received_;
};

TEST_F(IpcInlineBudgetTest, InlinePayloadWaitsForRoomAndArrivesWhole) {
  PeerId a_id = 0, b_id = 0;
  IpcTestClient a = Attach(&a_id);
  IpcTestClient b = Attach(&b_id);
  const std::string a_bytes = Pattern(80000, 1);
  const std::string b_bytes = Pattern(80000, 2);

  Notification a_delivered;
  ExpectKept(a_id, &a_delivered);
  SendInline(a, a_bytes, 0, a_bytes.size());
  ASSERT_TRUE(a_delivered.WaitForNotificationWithTimeout(kTestDeadline));
  EXPECT_EQ(Received(a_id), a_bytes);

  // A's 80000 bytes are still held by the core: B's 80000 do not fit, so B
  // is not read (the strict mock fails on an early delivery), although all
  // of it is sent.
  SendInline(b, b_bytes, 0, b_bytes.size());
  ASSERT_TRUE(WaitForBudget({80000, 1}));

  Notification b_delivered;
  ExpectKept(b_id, &b_delivered);
  DropHeld();  // A's conversion is over
  ASSERT_TRUE(b_delivered.WaitForNotificationWithTimeout(kTestDeadline));
  EXPECT_EQ(Received(b_id), b_bytes);
  EXPECT_EQ(Budget(), std::make_pair(uint64_t{80000}, size_t{0}));
  DropHeld();
  EXPECT_TRUE(WaitForBudget({0, 0}));
}

TEST_F(IpcInlineBudgetTest, PayloadLargerThanTheBudgetIsReadAlone) {
  PeerId id = 0;
  IpcTestClient client = Attach(&id);
  const std::string bytes = Pattern(3 * kBudget, 3);
  Notification delivered;
  ExpectKept(id, &delivered);
  SendInline(client, bytes, 0, bytes.size());
  ASSERT_TRUE(delivered.WaitForNotificationWithTimeout(kTestDeadline));
  EXPECT_EQ(Received(id), bytes);
  EXPECT_EQ(Budget(), std::make_pair(uint64_t{3 * kBudget}, size_t{0}));
  DropHeld();
  EXPECT_TRUE(WaitForBudget({0, 0}));
}

TEST_F(IpcInlineBudgetTest, PeerLostMidPayloadFreesItsRoom) {
  PeerId a_id = 0, b_id = 0;
  IpcTestClient a = Attach(&a_id);
  IpcTestClient b = Attach(&b_id);
  const std::string a_bytes = Pattern(80000, 4);
  const std::string b_bytes = Pattern(80000, 5);
  // A announces 80000 bytes and sends half; B waits behind it.
  SendInline(a, a_bytes, 0, kChunk);
  ASSERT_TRUE(WaitForBudget({80000, 0}));
  // Set before B's bytes go out: a.Close() alone would not order it before
  // the loop's call for ThreadSanitizer.
  Notification b_delivered;
  ExpectKept(b_id, &b_delivered);
  SendInline(b, b_bytes, 0, b_bytes.size());
  ASSERT_TRUE(WaitForBudget({80000, 1}));
  a.Close();
  ASSERT_TRUE(b_delivered.WaitForNotificationWithTimeout(kTestDeadline));
  EXPECT_EQ(Received(b_id), b_bytes);
  DropHeld();
  EXPECT_TRUE(WaitForBudget({0, 0}));
}

TEST_F(IpcInlineBudgetTest, ChunksOfAWaitingPayloadAreNotDropped) {
  // B's chunks sit in its socket while it waits; more than fits in the
  // socket buffer makes its sends block, and they resume once B is read.
  PeerId a_id = 0, b_id = 0;
  IpcTestClient a = Attach(&a_id);
  IpcTestClient b = Attach(&b_id);
  const std::string a_bytes = Pattern(kBudget, 6);
  const std::string b_bytes = Pattern(10 * kBudget, 7);
  Notification a_delivered;
  ExpectKept(a_id, &a_delivered);
  SendInline(a, a_bytes, 0, a_bytes.size());
  ASSERT_TRUE(a_delivered.WaitForNotificationWithTimeout(kTestDeadline));

  Notification b_delivered;
  ExpectKept(b_id, &b_delivered);
  std::thread sender([&] { SendInline(b, b_bytes, 0, b_bytes.size()); });
  ASSERT_TRUE(WaitForBudget({kBudget, 1}));
  DropHeld();
  ASSERT_TRUE(b_delivered.WaitForNotificationWithTimeout(kTestDeadline));
  sender.join();
  EXPECT_EQ(Received(b_id), b_bytes);
}

class IpcHelloRateTest : public testing::IpcServerFixture {};

TEST_F(IpcHelloRateTest, HelloBeyondTheRateIsRefusedAsRateLimitedAndReported) {
  IpcServerOptions options;
  options.hello_rate = 0.001;  // no refill within the test
  options.hello_burst = 1;
  StartServer(options);
  auto first = IpcTestClient::Connect(socket_path_);
  ASSERT_TRUE(first.ok());
  PeerId first_id = ConnectAndHello(&*first);
  EXPECT_CALL(core_, OnPeerGone(first_id, _, _)).Times(::testing::AtMost(1));

  Notification reported;
  EXPECT_CALL(core_, OnHelloRefused(_, _, _))
      .WillOnce([&](const PeerCredentials& creds, const v1::ipc::Hello& hello,
                    const absl::Status& status) {
        EXPECT_EQ(creds.uid, getuid());
        EXPECT_EQ(hello.job_id(), "job-7");
        EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
        EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("ipc.hello_rate"));
        reported.Notify();
      });
  auto second = IpcTestClient::Connect(socket_path_);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(second->SendHello().ok());
  absl::StatusOr<v1::ipc::DaemonMessage> reply = second->Receive();
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_TRUE(reply->has_hello_rejected());
  EXPECT_EQ(reply->hello_rejected().reason(), v1::ipc::REJECT_REASON_RATE_LIMITED);
  EXPECT_THAT(reply->hello_rejected().message(), ::testing::HasSubstr("too many registrations"));
  EXPECT_TRUE(second->WaitForClose());
  ASSERT_TRUE(reported.WaitForNotificationWithTimeout(kTestDeadline));
}

}  // namespace
}  // namespace gpuctl::daemon
