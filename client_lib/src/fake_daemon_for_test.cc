#include "client_lib/src/fake_daemon_for_test.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

namespace gpuctl::client::testing {
namespace {

bool WaitReadable(int fd, int timeout_ms) {
  pollfd pfd{fd, POLLIN, 0};
  int rc;
  do {
    rc = poll(&pfd, 1, timeout_ms);
  } while (rc < 0 && errno == EINTR);
  return rc > 0;
}

// The system call the task is blocked in, or -1 (running, or not in one).
int64_t BlockedSyscall(const std::filesystem::path& task) {
  std::ifstream in(task / "syscall");
  int64_t number = -1;
  if (!(in >> number)) return -1;  // "running"
  return number;
}

std::string ThreadName(const std::filesystem::path& task) {
  std::ifstream in(task / "comm");
  std::string name;
  std::getline(in, name);
  return name;
}

}  // namespace

bool WaitUntilThreadBlockedIn(const std::string& name, int64_t syscall_number, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  // Seen twice in a row, 2 ms apart: the thread is waiting, not passing by.
  int seen = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    bool blocked = false;
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
      if (ThreadName(task.path()) == name && BlockedSyscall(task.path()) == syscall_number) {
        blocked = true;
      }
    }
    seen = blocked ? seen + 1 : 0;
    if (seen >= 2) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

TempDir::TempDir() {
  std::string tmpl = "/tmp/gpuctl-client-test-XXXXXX";
  if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

FakeDaemon::FakeDaemon(std::string socket_path) : path_(std::move(socket_path)) {
  unlink(path_.c_str());
  listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_fd_, 16) != 0) {
    close(listen_fd_);
    listen_fd_ = -1;
  }
}

FakeDaemon::~FakeDaemon() {
  CloseConnection();
  if (hello_fd_ >= 0) close(hello_fd_);
  if (listen_fd_ >= 0) close(listen_fd_);
  unlink(path_.c_str());
}

void FakeDaemon::CloseConnection() {
  if (conn_fd_ >= 0) close(conn_fd_);
  conn_fd_ = -1;
}

bool FakeDaemon::Accept(int timeout_ms) {
  if (!WaitReadable(listen_fd_, timeout_ms)) return false;
  const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return false;
  CloseConnection();
  conn_fd_ = fd;
  return true;
}

bool FakeDaemon::Handshake(int timeout_ms) {
  if (!Accept(timeout_ms)) return false;
  std::optional<Received> received = Receive(timeout_ms);
  if (!received.has_value()) return false;
  const wire::Hello* hello = std::get_if<wire::Hello>(&received->message);
  if (hello == nullptr) {
    if (received->fd >= 0) close(received->fd);
    return false;
  }
  hello_ = *hello;
  if (hello_fd_ >= 0) close(hello_fd_);
  hello_fd_ = received->fd;
  wire::HelloAck ack;
  ack.protocol_major = wire::kProtocolMajor;
  ack.protocol_minor = wire::kProtocolMinor;
  ack.daemon_version = "fake";
  return Send(ack);
}

std::optional<Received> FakeDaemon::Receive(int timeout_ms) {
  if (conn_fd_ < 0 || !WaitReadable(conn_fd_, timeout_ms)) return std::nullopt;
  std::string buf(wire::kMaxIpcMessageBytes + 1, '\0');
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(conn_fd_, &msg, MSG_CMSG_CLOEXEC);
  if (n <= 0 || (msg.msg_flags & MSG_TRUNC) != 0) return std::nullopt;
  Received r;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      std::memcpy(&r.fd, CMSG_DATA(c), sizeof(int));
    }
  }
  buf.resize(static_cast<size_t>(n));
  if (!wire::Decode(buf, &r.message)) {
    if (r.fd >= 0) close(r.fd);
    return std::nullopt;
  }
  return r;
}

bool FakeDaemon::Send(const wire::DaemonMessage& message) {
  std::string bytes;
  wire::Encode(message, &bytes);
  return SendRaw(bytes);
}

bool FakeDaemon::SendRaw(const std::string& bytes) {
  return conn_fd_ >= 0 && send(conn_fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
                              static_cast<ssize_t>(bytes.size());
}

bool FakeDaemon::WaitPeerClosed(int timeout_ms) {
  char c;
  while (conn_fd_ >= 0 && WaitReadable(conn_fd_, timeout_ms)) {
    const ssize_t n = recv(conn_fd_, &c, 1, MSG_DONTWAIT | MSG_TRUNC);
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN && errno != EINTR) return true;
  }
  return false;
}

}  // namespace gpuctl::client::testing
