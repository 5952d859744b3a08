// The kineto sockets with the real bridge and core behind them, driven by
// a datagram client that speaks libkineto's bytes (testing/kineto_client.h)
// from this process, from a child in its own network namespace, and from
// senders of malformed and spoofed datagrams.
#include "daemon/kineto/kineto_server.h"

#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/common/testing/notification.h"
#include "daemon/common/thread_pool_executor.h"
#include "daemon/core/peer_router.h"
#include "daemon/kineto/kineto_bridge.h"
#include "daemon/kineto/testing/kineto_client.h"
#include "daemon/store/local_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon::kineto {
namespace {

namespace fs = std::filesystem;
using ::gpuctl::testing::Notification;
using ::testing::HasSubstr;
using testing::KinetoClient;

constexpr absl::Duration kDeadline = absl::Seconds(10);

std::string Heartbeat(int32_t pid, int32_t type = 3) {
  KinetoRequest request;
  request.type = type;
  request.pids = {pid, 1};
  return EncodeRequest(request);
}

class KinetoServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/gk-XXXXXX";  // short: socket paths must fit
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    tmp_ = tmpl;
    name_ = absl::StrCat("gpuctl-test-", getpid(), "-", counter_++);
    options_.abstract_name = name_;
    options_.socket_dir = tmp_ + "/k";
    loop_ = *EventLoop::Create();
  }
  void TearDown() override {
    if (thread_.joinable()) {
      OnLoop([this] {
        if (server_ != nullptr) server_->Stop();
      });
      loop_->Quit();
      thread_.join();
    }
    bridge_.reset();
    core_.reset();
    server_.reset();
    worker_.Shutdown();
    fs::remove_all(tmp_);
  }
  absl::Status Start() {
    absl::StatusOr<std::unique_ptr<KinetoServer>> server =
        KinetoServer::Create(options_, loop_.get());
    if (!server.ok()) return server.status();
    server_ = *std::move(server);
    store_ = *LocalTraceStore::Create(tmp_ + "/traces");
    CoreOptions core_options;
    core_options.hostname = "h1";
    core_ =
        DaemonCore::Create(core_options, {&clock_, loop_.get(), &worker_, store_.get(), &router_});
    KinetoBridgeOptions bridge_options;
    bridge_options.hostname = "h1";
    bridge_ = std::make_unique<KinetoBridge>(
        bridge_options,
        KinetoBridge::Deps{&clock_, loop_.get(), &worker_, core_.get(), &proc_, server_.get()});
    router_.set_kineto(bridge_.get());
    if (absl::Status s = server_->Start(bridge_.get()); !s.ok()) return s;
    thread_ = std::thread([this] { loop_->Run(); });
    return absl::OkStatus();
  }
  void OnLoop(std::function<void()> fn) {
    Notification done;
    loop_->Post([&] {
      fn();
      done.Notify();
    });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(kDeadline));
  }
  size_t Registered() {
    size_t n = 0;
    OnLoop([&] { n = bridge_->size(); });
    return n;
  }
  // The registry's size once it is `n` (a new process is read on the
  // worker, then registered on the loop), or as it is at the deadline.
  size_t RegisteredWhen(size_t n) {
    const absl::Time end = absl::Now() + kDeadline;
    size_t got = Registered();
    while (got != n && absl::Now() < end) {
      absl::SleepFor(absl::Milliseconds(5));
      got = Registered();
    }
    return got;
  }
  // Sends heartbeats until one is answered (the server's queue is shared
  // with any flood in flight).
  std::optional<testing::Reply> Poll(KinetoClient& client, int32_t pid) {
    const absl::Time end = absl::Now() + kDeadline;
    while (absl::Now() < end) {
      if (client.Send(Heartbeat(pid)) != 0) return std::nullopt;
      if (auto reply = client.Receive(absl::Milliseconds(200))) return reply;
    }
    return std::nullopt;
  }

  static inline int counter_ = 0;
  std::string tmp_;
  std::string name_;
  KinetoServerOptions options_;
  RealClock clock_;
  std::unique_ptr<EventLoop> loop_;
  std::thread thread_;
  ThreadPoolExecutor worker_{1};
  ProcfsKinetoReader proc_;
  PeerRouter router_;
  std::unique_ptr<LocalTraceStore> store_;
  std::unique_ptr<DaemonCore> core_;
  std::unique_ptr<KinetoServer> server_;
  std::unique_ptr<KinetoBridge> bridge_;
};

TEST_F(KinetoServerTest, AbstractSocketAnswersFromItsOwnName) {
  ASSERT_TRUE(Start().ok());
  KinetoClient client(name_, "", "11111111-2222-4333-8444-555555555555");
  ASSERT_TRUE(client.bound());
  std::optional<testing::Reply> reply = Poll(client, getpid());
  ASSERT_TRUE(reply.has_value());
  // libkineto reads the sender's name after the first NUL: it must be the
  // abstract name with its trailing NUL.
  EXPECT_EQ(reply->from, absl::StrCat(std::string(1, '\0'), name_, std::string(1, '\0')));
  EXPECT_EQ(reply->bytes, EncodeRequestReply(""));
  EXPECT_EQ(RegisteredWhen(1u), 1u);
}

TEST_F(KinetoServerTest, PathSocketAnswersFromUnderTheDirectory) {
  ASSERT_TRUE(Start().ok());
  EXPECT_EQ(fs::status(options_.socket_dir).permissions(), fs::perms::all | fs::perms::sticky_bit);
  KinetoClient client("", options_.socket_dir, "a");
  ASSERT_TRUE(client.bound());
  std::optional<testing::Reply> reply = Poll(client, getpid());
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->from.substr(0, reply->from.find('\0')), options_.socket_dir + "/dynolog");
  ASSERT_EQ(RegisteredWhen(1u), 1u);
  v1::GetStatusResponse status;
  OnLoop([&] { status = core_->GetStatus(); });
  EXPECT_EQ(status.kineto().state(), "serving");
  EXPECT_EQ(status.kineto().socket_path(), options_.socket_dir + "/dynolog");
  EXPECT_TRUE(status.kineto().abstract_socket());
  EXPECT_EQ(status.kineto().processes(), 1u);
}

// The sender: libkineto's datagrams from Python, in a network namespace of
// its own (`unshare --net`, spawned: no fork of this threaded test).
// Exit 0: the abstract name refused and the path socket answered.
constexpr char kNetnsSender[] = R"(
import os, socket, struct, sys
name, sockdir = sys.argv[1], sys.argv[2]
def req(pid):
    p = struct.pack('=iiqi', 3, 1, 0, pid)
    return struct.pack('=Q', len(p)) + b'req'.ljust(32, b'\0') + p
a = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
a.bind(b'\0dynoconfigclientnetns-a\0')
try:
    a.sendto(req(os.getpid()), b'\0' + name.encode() + b'\0')
    sys.exit(1)
except ConnectionRefusedError:
    pass
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(os.path.join(sockdir, 'dynoconfigclientnetns-b'))
s.settimeout(0.2)
for _ in range(50):
    s.sendto(req(os.getpid()), os.path.join(sockdir, 'dynolog'))
    try:
        data, addr = s.recvfrom(4096)
        sys.exit(0 if addr == os.path.join(sockdir, 'dynolog') else 2)
    except socket.timeout:
        pass
sys.exit(3)
)";

TEST_F(KinetoServerTest, SenderInItsOwnNetworkNamespaceReachesOnlyThePathSocket) {
  ASSERT_TRUE(Start().ok());
  std::vector<std::string> args = {"unshare",    "--net", "python3",          "-c",
                                   kNetnsSender, name_,   options_.socket_dir};
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t child = 0;
  ASSERT_EQ(posix_spawnp(&child, "unshare", nullptr, nullptr, argv.data(), environ), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  // unshare exits 1 itself when it may not make the namespace.
  if (WEXITSTATUS(status) == 1 && geteuid() != 0) {
    GTEST_SKIP() << "no permission to unshare the network namespace";
  }
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the abstract name answered or unshare failed, 2: "
                                       "wrong reply address, 3: the path socket did not answer";
}

TEST_F(KinetoServerTest, MalformedAndSpoofedFloodsDoNotDisturbAGoodClient) {
  ASSERT_TRUE(Start().ok());
  std::atomic<int> sent = 0;
  std::thread flood([&] {
    KinetoClient bad(name_, "", "bad");
    KinetoRequest spoof;
    spoof.type = 3;
    spoof.pids = {1};  // init's pid, not the sender's
    const std::string garbage[] = {std::string(3, 'x'), EncodeRaw("evil", "1234"),
                                   EncodeRaw("req", std::string(17, '\0')), EncodeRequest(spoof)};
    for (int i = 0; i < 4000; ++i) {
      bad.Send(garbage[i % 4]);
      sent.fetch_add(1);
    }
  });
  while (sent.load() < 400) std::this_thread::yield();
  KinetoClient good(name_, "", "good");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Poll(good, getpid()).has_value()) << i;
  flood.join();
  // The socket's queue is in order: once this is answered, the flood has
  // been read.
  ASSERT_TRUE(Poll(good, getpid()).has_value());
  EXPECT_EQ(RegisteredWhen(1u), 1u);
  uint64_t malformed = 0, refused = 0;
  OnLoop([&] {
    malformed = server_->malformed();
    refused = bridge_->refused();
  });
  EXPECT_EQ(malformed, 3000u);
  EXPECT_EQ(refused, 1000u);
}

TEST_F(KinetoServerTest, TakenAbstractNameInAutoModeServesThePathAlone) {
  // Another process holds the daemon's name.
  int holder = socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name_.data(), name_.size());
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&addr),  // NOLINT
                 offsetof(sockaddr_un, sun_path) + name_.size() + 2),
            0);
  ASSERT_TRUE(Start().ok());
  v1::KinetoBridgeStatus status = server_->Status();
  EXPECT_EQ(status.state(), "partial");
  EXPECT_FALSE(status.abstract_socket());
  EXPECT_THAT(status.message(), HasSubstr("another daemon (dynolog?) holds"));
  EXPECT_TRUE(server_->serving());
  close(holder);
}

TEST_F(KinetoServerTest, TakenAbstractNameInModeOnFailsStartup) {
  int holder = socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name_.data(), name_.size());
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&addr),  // NOLINT
                 offsetof(sockaddr_un, sun_path) + name_.size() + 2),
            0);
  options_.mode = KinetoMode::kOn;
  absl::Status s = Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("kineto.mode on: another daemon (dynolog?) holds"));
  close(holder);
}

TEST_F(KinetoServerTest, ModeOffBindsNothing) {
  options_.mode = KinetoMode::kOff;
  ASSERT_TRUE(Start().ok());
  EXPECT_FALSE(server_->serving());
  EXPECT_EQ(server_->Status().state(), "off");
  EXPECT_FALSE(fs::exists(options_.socket_dir + "/dynolog"));
  KinetoClient client(name_, "", "d");
  EXPECT_EQ(client.Send(Heartbeat(getpid())), ECONNREFUSED);
}

TEST_F(KinetoServerTest, LiveDaemonsPathSocketIsKeptAndAStaleOneReplaced) {
  fs::create_directories(options_.socket_dir);
  const std::string path = options_.socket_dir + "/dynolog";
  int live = socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  ASSERT_EQ(bind(live, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);  // NOLINT
  ASSERT_TRUE(Start().ok());
  EXPECT_EQ(server_->Status().socket_path(), "");
  EXPECT_THAT(server_->Status().message(), HasSubstr("another live daemon"));
  // The other daemon still owns its socket.
  KinetoClient client("", options_.socket_dir, "e");
  EXPECT_EQ(client.Send(Heartbeat(getpid())), 0);
  char buf[128];
  EXPECT_GT(recv(live, buf, sizeof(buf), MSG_DONTWAIT), 0);
  close(live);
  // Closed: the file is stale now, and a new server takes the path.
  OnLoop([this] { server_->Stop(); });
  absl::StatusOr<std::unique_ptr<KinetoServer>> second =
      KinetoServer::Create(options_, loop_.get());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->Status().socket_path(), path);
  (*second)->Stop();
}

}  // namespace
}  // namespace gpuctl::daemon::kineto
