#include "client_lib/src/ipc_client.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "client_lib/src/wire/ipc_messages.h"

namespace gpuctl::client {
namespace {

constexpr size_t kMaxPassedFds = 8;

void CloseReceivedFds(msghdr* msg) {
  for (cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr; c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (fd >= 0) close(fd);
    }
  }
}

}  // namespace

bool IpcConnection::Connect(const std::string& path, std::string* error) {
  Close();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    *error = "socket path empty or longer than " + std::to_string(sizeof(addr.sun_path) - 1);
    return false;
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + strerror(errno);
    return false;
  }
  int rc;
  do {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API's own idiom.
    rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  // A Unix-domain connect either completes at once or fails (EAGAIN when
  // the listener's backlog is full): no in-progress state to wait on.
  if (rc != 0) {
    *error = "connect " + path + ": " + strerror(errno);
    close(fd);
    return false;
  }
  fd_ = fd;
  return true;
}

IoResult IpcConnection::Send(std::string_view datagram, int pass_fd, int timeout_ms,
                             const std::atomic<bool>* cancel) {
  if (fd_ < 0 || datagram.size() > wire::kMaxIpcMessageBytes) return IoResult::kError;
  iovec iov{const_cast<char*>(datagram.data()), datagram.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (pass_fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  const int64_t deadline_ns = clock_->MonotonicNs() + int64_t{timeout_ms} * 1'000'000;
  for (;;) {
    const ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<size_t>(n) == datagram.size() ? IoResult::kOk : IoResult::kError;
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) return IoResult::kClosed;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return IoResult::kError;
    if (cancel != nullptr && cancel->load(std::memory_order_acquire)) return IoResult::kCancelled;
    const int64_t left_ns = deadline_ns - clock_->MonotonicNs();
    if (left_ns <= 0) return IoResult::kTimedOut;
    // Whole milliseconds, rounded up: poll's unit.
    const int64_t left_ms = (left_ns + 999'999) / 1'000'000;
    // With a cancel flag the wait is sliced so that a raised flag is seen.
    const int wait_ms =
        static_cast<int>(cancel != nullptr ? std::min<int64_t>(left_ms, kCancelCheckMs) : left_ms);
    pollfd pfd{fd_, POLLOUT, 0};
    const int rc = poll(&pfd, 1, wait_ms);
    if (rc == 0) continue;
    if (rc < 0 && errno != EINTR) return IoResult::kError;
    if (rc > 0 && (pfd.revents & (POLLHUP | POLLERR)) != 0) return IoResult::kClosed;
  }
}

IoResult IpcConnection::Receive(std::string* datagram) {
  if (fd_ < 0) return IoResult::kError;
  constexpr size_t kBufferBytes = wire::kMaxIpcMessageBytes + 1;
  if (!receive_buffer_) receive_buffer_.reset(new char[kBufferBytes]);
  iovec iov{receive_buffer_.get(), kBufferBytes};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(fd_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    datagram->clear();
    if (errno == EAGAIN || errno == EWOULDBLOCK) return IoResult::kWouldBlock;
    return errno == ECONNRESET ? IoResult::kClosed : IoResult::kError;
  }
  CloseReceivedFds(&msg);
  // On a SOCK_SEQPACKET socket 0 bytes means the peer closed (the daemon
  // never sends empty datagrams).
  if (n == 0) {
    datagram->clear();
    return IoResult::kClosed;
  }
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 ||
      static_cast<size_t>(n) > wire::kMaxIpcMessageBytes) {
    datagram->clear();
    return IoResult::kError;
  }
  datagram->assign(receive_buffer_.get(), static_cast<size_t>(n));
  return IoResult::kOk;
}

void IpcConnection::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

}  // namespace gpuctl::client
