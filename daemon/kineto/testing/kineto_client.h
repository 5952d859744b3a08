#ifndef GPUCTL_DAEMON_KINETO_TESTING_KINETO_CLIENT_H_
#define GPUCTL_DAEMON_KINETO_TESTING_KINETO_CLIENT_H_

// Test-only: a datagram client that speaks libkineto's side of the daemon
// protocol byte for byte as its IPC fabric does: an AF_UNIX SOCK_DGRAM
// socket bound to "\0dynoconfigclient<id>\0" (or <dir>/dynoconfigclient<id>
// with a socket directory), sending to "\0<daemon>\0" (or <dir>/dynolog)
// and reading one reply with a deadline.

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace gpuctl::daemon::kineto::testing {

struct Reply {
  std::string bytes;
  std::string from;  // sun_path bytes as received (with the abstract NULs)
};

class KinetoClient {
 public:
  // `daemon`: the daemon's abstract name, or with `dir` its directory.
  KinetoClient(std::string daemon, std::string dir, const std::string& id)
      : daemon_(std::move(daemon)), dir_(std::move(dir)) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr;
    const socklen_t len = Address(absl::StrCat("dynoconfigclient", id), &addr);
    if (!dir_.empty()) unlink(addr.sun_path);
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) == 0;  // NOLINT
  }
  ~KinetoClient() {
    if (fd_ >= 0) close(fd_);
  }
  bool bound() const { return bound_; }

  // 0 on success, else the errno of sendto.
  int Send(const std::string& datagram) {
    sockaddr_un addr;
    const socklen_t len = Address(dir_.empty() ? daemon_ : "dynolog", &addr);
    const ssize_t n = sendto(fd_, datagram.data(), datagram.size(), 0,
                             reinterpret_cast<sockaddr*>(&addr), len);  // NOLINT
    return n < 0 ? errno : 0;
  }

  std::optional<Reply> Receive(absl::Duration timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) != 1) {
      return std::nullopt;
    }
    char buf[70000];
    sockaddr_un from = {};
    socklen_t from_len = sizeof(from);
    const ssize_t n = recvfrom(fd_, buf, sizeof(buf), MSG_DONTWAIT,
                               reinterpret_cast<sockaddr*>(&from), &from_len);  // NOLINT
    if (n < 0) return std::nullopt;
    Reply reply;
    reply.bytes.assign(buf, static_cast<size_t>(n));
    if (from_len > offsetof(sockaddr_un, sun_path)) {
      reply.from.assign(from.sun_path, from_len - offsetof(sockaddr_un, sun_path));
    }
    return reply;
  }

 private:
  socklen_t Address(const std::string& name, sockaddr_un* addr) const {
    *addr = {};
    addr->sun_family = AF_UNIX;
    if (dir_.empty()) {
      std::memcpy(addr->sun_path + 1, name.data(), name.size());
      return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + 2);
    }
    const std::string path = absl::StrCat(dir_, "/", name);
    std::memcpy(addr->sun_path, path.data(), path.size());
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  }

  std::string daemon_;
  std::string dir_;
  int fd_ = -1;
  bool bound_ = false;
};

}  // namespace gpuctl::daemon::kineto::testing

#endif  // GPUCTL_DAEMON_KINETO_TESTING_KINETO_CLIENT_H_
