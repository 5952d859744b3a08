#include "daemon/ipc/testing/ipc_test_client.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "daemon/common/testing/notification.h"

namespace gpuctl::daemon::testing {

using ::testing::_;

absl::StatusOr<IpcTestClient> IpcTestClient::Connect(const std::string& path) {
  UniqueFd fd(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return absl::InternalError(std::strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), std::min(path.size(), sizeof(addr.sun_path) - 1));
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API's own idiom.
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(absl::StrCat("connect: ", std::strerror(errno)));
  }
  return IpcTestClient(std::move(fd));
}

absl::Status IpcTestClient::SendRaw(const std::string& bytes, std::vector<int> fds) {
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * std::max<size_t>(fds.size(), 1)));
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n = sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
  for (int fd : fds) close(fd);
  if (n < 0) return absl::UnavailableError(absl::StrCat("sendmsg: ", std::strerror(errno)));
  return absl::OkStatus();
}

absl::Status IpcTestClient::Send(const v1::ipc::ClientMessage& message, std::vector<int> fds) {
  return SendRaw(message.SerializeAsString(), std::move(fds));
}

absl::Status IpcTestClient::SendHello() {
  v1::ipc::ClientMessage msg;
  v1::ipc::Hello* hello = msg.mutable_hello();
  hello->set_protocol_major(1);
  hello->set_pid(getpid());
  hello->set_job_id("job-7");
  hello->set_rank(3);
  return Send(msg);
}

absl::StatusOr<v1::ipc::DaemonMessage> IpcTestClient::Receive(absl::Duration timeout) {
  pollfd p{fd_.get(), POLLIN, 0};
  int r = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  if (r == 0) return absl::DeadlineExceededError("no message");
  std::string buf(kMaxIpcMessageBytes, '\0');
  ssize_t n = recv(fd_.get(), buf.data(), buf.size(), MSG_DONTWAIT);
  if (n < 0) return absl::UnavailableError(std::strerror(errno));
  if (n == 0) return absl::UnavailableError("connection closed");
  v1::ipc::DaemonMessage msg;
  if (!msg.ParseFromArray(buf.data(), static_cast<int>(n))) {
    return absl::DataLossError("undecodable DaemonMessage");
  }
  return msg;
}

bool IpcTestClient::WaitForClose(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  char buf[kMaxIpcMessageBytes];
  while (absl::Now() < deadline) {
    pollfd p{fd_.get(), POLLIN, 0};
    int left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (poll(&p, 1, std::max(left, 1)) <= 0) continue;
    ssize_t n = recv(fd_.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

int MakeMemfd(const std::string& bytes, bool seal) {
  int fd = memfd_create("gpuctl-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  if (!bytes.empty() &&
      write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
    close(fd);
    return -1;
  }
  if (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void IpcServerFixture::SetUp() {
  char tmpl[] = "/tmp/gpuctl-ipc-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  dir_ = tmpl;
  socket_path_ = dir_ + "/run/gpuctl.sock";  // parent created by the server
  // Inline payloads report their chunks; tests that care expect them.
  EXPECT_CALL(core_, OnPayloadProgress).Times(::testing::AnyNumber());
  auto loop = EventLoop::Create();
  ASSERT_TRUE(loop.ok()) << loop.status();
  loop_ = std::move(*loop);
}

void IpcServerFixture::StartServer(IpcServerOptions options) {
  options.socket_path = socket_path_;
  options.daemon_version = "9.9.9-test";
  auto server = IpcServer::Create(options, loop_.get());
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = std::move(*server);
  ASSERT_TRUE(server_->Start(&core_).ok());
  thread_ = std::thread([this] { loop_->Run(); });
}

void IpcServerFixture::TearDown() {
  if (thread_.joinable()) {
    RunOnLoop([this] { server_.reset(); });
    loop_->Quit();
    thread_.join();
  }
  server_.reset();
  loop_.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void IpcServerFixture::RunOnLoop(absl::AnyInvocable<void() &&> fn) {
  gpuctl::testing::Notification done;
  loop_->Post([&] {
    std::move(fn)();
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kTestDeadline));
}

PeerId IpcServerFixture::ConnectAndHello(IpcTestClient* client) {
  auto id = std::make_shared<std::atomic<PeerId>>(0);
  EXPECT_CALL(core_, OnPeerHello(_, _, _, _))
      .WillOnce([id](PeerId peer, const PeerCredentials&, const v1::ipc::Hello&,
                     std::unique_ptr<StepCounterView>) {
        id->store(peer);
        return absl::OkStatus();
      })
      .RetiresOnSaturation();
  EXPECT_TRUE(client->SendHello().ok());
  auto ack = client->Receive();
  EXPECT_TRUE(ack.ok()) << ack.status();
  if (ack.ok()) {
    EXPECT_TRUE(ack->has_hello_ack());
  }
  return id->load();
}

}  // namespace gpuctl::daemon::testing
