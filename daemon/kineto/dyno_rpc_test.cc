#include "daemon/kineto/dyno_rpc.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;

// A DynoRpcServer on 127.0.0.1 port 0, run by a real event loop on its own
// thread; the handler answers "echo:<request>".
class DynoRpcServerTest : public ::testing::Test {
 protected:
  void Start(DynoRpcOptions options = {}) {
    options.listen = "127.0.0.1:0";
    auto loop = EventLoop::Create();
    ASSERT_TRUE(loop.ok());
    loop_ = *std::move(loop);
    auto server = DynoRpcServer::Create(options, loop_.get(), [this](absl::string_view request) {
      ++handled_;
      return "echo:" + std::string(request);
    });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    const std::string& address = server_->address();
    ASSERT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port_)) << address;
    thread_ = std::thread([this] { loop_->Run(); });
  }
  void TearDown() override {
    if (!thread_.joinable()) return;
    loop_->Post([&] {
      server_.reset();
      loop_->Quit();
    });
    thread_.join();
  }

  int Connect() {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);  // NOLINT
    timeval tv = {.tv_sec = 10, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
  }
  static std::string Frame(const std::string& body) {
    int32_t size = static_cast<int32_t>(body.size());
    return std::string(reinterpret_cast<const char*>(&size), 4) + body;  // NOLINT
  }
  static void SendAll(int fd, const std::string& bytes) {
    ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Everything until the server closes: a framed answer, or nothing.
  static std::string ReadToEnd(int fd) {
    std::string all;
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) all.append(buf, static_cast<size_t>(n));
    return all;
  }
  static std::string Body(const std::string& framed) {
    if (framed.size() < 4) return "<short: " + std::to_string(framed.size()) + " bytes>";
    int32_t size = 0;
    std::memcpy(&size, framed.data(), 4);
    EXPECT_EQ(static_cast<size_t>(size) + 4, framed.size());
    return framed.substr(4);
  }

  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<DynoRpcServer> server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int> handled_{0};
};

TEST_F(DynoRpcServerTest, AnswersOneFramedRequestInHostByteOrder) {
  Start();
  int fd = Connect();
  SendAll(fd, Frame(R"({"fn":"getStatus"})"));
  EXPECT_EQ(Body(ReadToEnd(fd)), R"(echo:{"fn":"getStatus"})");
  close(fd);
}

TEST_F(DynoRpcServerTest, ARequestArrivingByteByByteIsWhole) {
  Start();
  int fd = Connect();
  const std::string framed = Frame(std::string(3000, 'x'));
  for (char c : framed) SendAll(fd, std::string(1, c));
  EXPECT_EQ(Body(ReadToEnd(fd)), "echo:" + std::string(3000, 'x'));
  close(fd);
}

TEST_F(DynoRpcServerTest, BadLengthsGetAnErrorAndNoHandlerCall) {
  DynoRpcOptions options;
  options.max_message_bytes = 100;
  Start(options);
  for (int32_t size : {0, -5, 101, 0x7fffffff}) {
    int fd = Connect();
    SendAll(fd, std::string(reinterpret_cast<const char*>(&size), 4));  // NOLINT
    std::string body = Body(ReadToEnd(fd));
    EXPECT_THAT(body, HasSubstr("\"status\": \"failed: a message of")) << size;
    EXPECT_THAT(body, HasSubstr("at most 100")) << size;
    close(fd);
  }
  EXPECT_EQ(handled_, 0);
}

TEST_F(DynoRpcServerTest, APeerThatGoesAwayMidRequestIsForgotten) {
  Start();
  int fd = Connect();
  SendAll(fd, Frame("{\"fn\"").substr(0, 7));
  close(fd);
  // The server still serves the next one.
  fd = Connect();
  SendAll(fd, Frame("{}"));
  EXPECT_EQ(Body(ReadToEnd(fd)), "echo:{}");
  close(fd);
  EXPECT_EQ(handled_, 1);
}

TEST_F(DynoRpcServerTest, SilentConnectionsAreClosedAndCapped) {
  DynoRpcOptions options;
  options.max_connections = 2;
  options.idle_timeout = absl::Milliseconds(300);
  Start(options);
  std::vector<int> idle = {Connect(), Connect()};
  // A third is closed at once while two are open.
  int third = Connect();
  EXPECT_EQ(ReadToEnd(third), "");
  close(third);
  // The idle ones are closed by the timeout (recv returns 0, not EAGAIN
  // after SO_RCVTIMEO's 10 s).
  for (int fd : idle) {
    EXPECT_EQ(ReadToEnd(fd), "");
    close(fd);
  }
  int fd = Connect();
  SendAll(fd, Frame("{}"));
  EXPECT_EQ(Body(ReadToEnd(fd)), "echo:{}");
  close(fd);
}

TEST(DynoRpcListenTest, OnlyLoopbackAddresses) {
  for (const char* ok :
       {"127.0.0.1:1778", "127.0.0.2:0", "localhost:1778", "[::1]:1778", "::1:5"}) {
    EXPECT_TRUE(CheckDynoRpcListen(ok).ok()) << ok;
  }
  for (const char* bad : {"0.0.0.0:1778", "10.0.0.1:1778", "[::]:1778", "example.com:1778",
                          "127.0.0.1", "127.0.0.1:65536", "127.0.0.1:x", ""}) {
    EXPECT_FALSE(CheckDynoRpcListen(bad).ok()) << bad;
  }
  EXPECT_THAT(CheckDynoRpcListen("0.0.0.0:1778").message(), HasSubstr("not a loopback address"));
}

TEST(DynoRpcListenTest, APortInUseIsReported) {
  auto loop = EventLoop::Create();
  ASSERT_TRUE(loop.ok());
  DynoRpcOptions options;
  options.listen = "127.0.0.1:0";
  auto first = DynoRpcServer::Create(options, loop->get(), [](absl::string_view) { return ""; });
  ASSERT_TRUE(first.ok());
  options.listen = (*first)->address();
  auto second = DynoRpcServer::Create(options, loop->get(), [](absl::string_view) { return ""; });
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("a dynolog, or another gpuctld, may hold it"));
}

}  // namespace
}  // namespace gpuctl::daemon
