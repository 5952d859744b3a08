#include "daemon/ipc/unix_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpuctl::daemon {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path, int err) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(err)));
}

absl::StatusOr<sockaddr_un> MakeAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "socket path must be 1 to ", sizeof(addr.sun_path) - 1, " bytes long: \"", path, "\""));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

// Removes a socket file left by a daemon that is gone; refuses to touch a
// live one or anything that is not a socket.
absl::Status RemoveStaleSocket(const std::string& path, const sockaddr_un& addr) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return Errno("cannot stat", path, errno);
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a socket; refusing to replace it"));
  }
  UniqueFd probe(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!probe.valid()) return Errno("socket() for probing", path, errno);
  if (connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 ||
      errno == EAGAIN || errno == EINPROGRESS) {
    return absl::FailedPreconditionError(absl::StrCat("another gpuctld is already listening on ",
                                                      path, "; stop it or pick another --socket"));
  }
  if (errno != ECONNREFUSED) return Errno("cannot probe existing socket", path, errno);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Errno("cannot remove stale socket", path, errno);
  }
  return absl::OkStatus();
}

}  // namespace

void UniqueFd::Reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

absl::StatusOr<UniqueFd> ListenSeqpacket(const std::string& path, int backlog,
                                         const SocketAccess& access) {
  absl::StatusOr<sockaddr_un> addr = MakeAddress(path);
  if (!addr.ok()) return addr.status();
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, std::max<size_t>(slash, 1));
  if (absl::Status s = PrepareSocketDirectory(dir, access, geteuid()); !s.ok()) return s;
  if (absl::Status s = RemoveStaleSocket(path, *addr); !s.ok()) return s;
  UniqueFd fd(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket() for", path, errno);
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0) {
    return Errno("cannot bind", path, errno);
  }
  // Who may connect is settled before listen(): until then every connect
  // is refused. Peers are then identified by SO_PEERCRED.
  if (absl::Status s = ApplySocketAccess(path, access); !s.ok()) return s;
  if (listen(fd.get(), backlog) != 0) return Errno("cannot listen on", path, errno);
  return fd;
}

RecvResult ReceiveDatagram(int fd, absl::Span<uint8_t> buffer, Datagram* out) {
  *out = Datagram();
  iovec iov{buffer.data(), buffer.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    return (errno == EAGAIN || errno == EWOULDBLOCK) ? RecvResult::kWouldBlock : RecvResult::kError;
  }
  // Take ownership of every descriptor first so none leaks on any path.
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int received;
      std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      out->fds.emplace_back(received);
    }
  }
  out->size = static_cast<size_t>(n);
  out->truncated = (msg.msg_flags & MSG_TRUNC) != 0;
  out->control_truncated = (msg.msg_flags & MSG_CTRUNC) != 0;
  if (n == 0 && out->fds.empty() && !out->truncated) return RecvResult::kEof;
  return RecvResult::kDatagram;
}

}  // namespace gpuctl::daemon
