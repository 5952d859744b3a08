#include "daemon/kineto/kineto_server.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"

namespace gpuctl::daemon::kineto {
namespace {

// Control space for the credentials and a few descriptors a sender might
// attach (closed at once; more are dropped by the kernel, MSG_CTRUNC).
constexpr size_t kMaxStrayFds = 4;

// Sticky and writable by all, like /tmp: each process binds its own
// "dynoconfigclient<uuid>" there, and none can remove another's.
constexpr mode_t kSocketDirMode = 01777;
// libkineto's own sockets are 0666; any local process may poll.
constexpr mode_t kPathSocketMode = 0666;

::gpuctl::UniqueFd DatagramSocket() {
  return ::gpuctl::UniqueFd(socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
}

absl::Status EnablePassCred(int fd) {
  int one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0) {
    return absl::InternalError(absl::StrCat("SO_PASSCRED: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// "\0<name>\0": libkineto counts the trailing NUL in the address length.
socklen_t AbstractAddress(const std::string& name, sockaddr_un* addr) {
  *addr = {};
  addr->sun_family = AF_UNIX;
  std::memcpy(addr->sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + 2);
}

absl::StatusOr<socklen_t> PathAddress(const std::string& path, sockaddr_un* addr) {
  *addr = {};
  addr->sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr->sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("kineto socket path ", path, " is longer than ",
                                                   sizeof(addr->sun_path) - 1, " bytes"));
  }
  std::memcpy(addr->sun_path, path.data(), path.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
}

// Whether some process has a datagram socket bound at `path` (a connect
// succeeds); a stale file refuses.
bool PathIsLive(const sockaddr_un& addr, socklen_t len) {
  ::gpuctl::UniqueFd probe = DatagramSocket();
  if (probe.get() < 0) return false;
  return connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), len) == 0;  // NOLINT
}

absl::Status PrepareDir(const std::string& dir) {
  struct stat st = {};
  if (lstat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("kineto.socket_dir ", dir, " exists and is not a directory"));
    }
    if ((st.st_mode & S_IWOTH) != 0 && (st.st_mode & S_ISVTX) == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "kineto.socket_dir ", dir, " is writable by anyone without the sticky bit: chmod +t it"));
    }
    return absl::OkStatus();
  }
  if (absl::Status s = MakeDirs(dir, 0755); !s.ok()) return s;
  // mkdir's mode passes through the umask: set it exactly.
  if (chmod(dir.c_str(), kSocketDirMode) != 0) {
    return ErrnoError(errno, "chmod", dir);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<KinetoMode> ParseKinetoMode(absl::string_view text) {
  if (text == "auto") return KinetoMode::kAuto;
  if (text == "on") return KinetoMode::kOn;
  if (text == "off") return KinetoMode::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat("kineto.mode must be auto, on or off, not \"", text.substr(0, 32), "\""));
}

std::string KinetoModeName(KinetoMode mode) {
  switch (mode) {
    case KinetoMode::kAuto:
      return "auto";
    case KinetoMode::kOn:
      return "on";
    case KinetoMode::kOff:
      return "off";
  }
  return "auto";
}

KinetoServer::KinetoServer(const KinetoServerOptions& options, EventLoop* loop)
    : options_(options), loop_(loop) {}

KinetoServer::~KinetoServer() { Stop(); }

absl::StatusOr<std::unique_ptr<KinetoServer>> KinetoServer::Create(
    const KinetoServerOptions& options, EventLoop* loop) {
  std::unique_ptr<KinetoServer> server(new KinetoServer(options, loop));
  if (options.mode == KinetoMode::kOff) return server;
  if (absl::Status s = server->Bind(); !s.ok()) return s;
  return server;
}

absl::Status KinetoServer::Bind() {
  const bool required = options_.mode == KinetoMode::kOn;
  ::gpuctl::UniqueFd fd = DatagramSocket();
  if (fd.get() < 0) return ErrnoError(errno, "socket", "kineto");
  if (absl::Status s = EnablePassCred(fd.get()); !s.ok()) return s;
  sockaddr_un addr;
  const socklen_t len = AbstractAddress(options_.abstract_name, &addr);
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) == 0) {  // NOLINT
    abstract_fd_ = std::move(fd);
  } else {
    const int err = errno;
    std::string why =
        err == EADDRINUSE
            ? absl::StrCat("another daemon (dynolog?) holds the abstract name \\0",
                           options_.abstract_name, "\\0")
            : absl::StrCat("cannot bind \\0", options_.abstract_name, "\\0: ", std::strerror(err));
    if (required) return absl::FailedPreconditionError(absl::StrCat("kineto.mode on: ", why));
    LogWarning("kineto bridge runs without the abstract socket", {{"reason", why}});
    unavailable_ = why;
  }
  if (options_.socket_dir.empty()) return absl::OkStatus();
  absl::Status path = BindPath();
  if (path.ok()) return absl::OkStatus();
  if (required) {
    return absl::FailedPreconditionError(absl::StrCat("kineto.mode on: ", path.message()));
  }
  LogWarning("kineto bridge runs without the path socket", {{"reason", path.message()}});
  unavailable_ = unavailable_.empty() ? std::string(path.message())
                                      : absl::StrCat(unavailable_, "; ", path.message());
  return absl::OkStatus();
}

absl::Status KinetoServer::BindPath() {
  if (absl::Status s = PrepareDir(options_.socket_dir); !s.ok()) return s;
  const std::string path = absl::StrCat(options_.socket_dir, "/", kDaemonEndpoint);
  sockaddr_un addr;
  absl::StatusOr<socklen_t> len = PathAddress(path, &addr);
  if (!len.ok()) return len.status();
  struct stat st = {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a socket"));
    }
    if (PathIsLive(addr, *len)) {
      return absl::FailedPreconditionError(
          absl::StrCat("another live daemon (dynolog or gpuctld) serves ", path));
    }
    unlink(path.c_str());
  }
  ::gpuctl::UniqueFd fd = DatagramSocket();
  if (fd.get() < 0) return ErrnoError(errno, "socket", path);
  if (absl::Status s = EnablePassCred(fd.get()); !s.ok()) return s;
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), *len) != 0) {  // NOLINT
    return ErrnoError(errno, "bind", path);
  }
  if (chmod(path.c_str(), kPathSocketMode) != 0) {
    const int err = errno;
    unlink(path.c_str());
    return ErrnoError(err, "chmod", path);
  }
  path_fd_ = std::move(fd);
  path_ = path;
  return absl::OkStatus();
}

absl::Status KinetoServer::Start(KinetoDatagramHandler* handler) {
  handler_ = handler;
  for (auto [fd, socket] : {std::pair{abstract_fd_.get(), KinetoSocket::kAbstract},
                            std::pair{path_fd_.get(), KinetoSocket::kPath}}) {
    if (fd < 0) continue;
    absl::Status s =
        loop_->AddFd(fd, EPOLLIN, [this, socket = socket](uint32_t) { OnReadable(socket); });
    if (!s.ok()) return s;
  }
  started_ = true;
  return absl::OkStatus();
}

void KinetoServer::Stop() {
  if (started_) {
    if (abstract_fd_.get() >= 0) loop_->RemoveFd(abstract_fd_.get());
    if (path_fd_.get() >= 0) loop_->RemoveFd(path_fd_.get());
    started_ = false;
  }
  abstract_fd_.Reset();
  if (path_fd_.get() >= 0) {
    path_fd_.Reset();
    unlink(path_.c_str());
  }
}

void KinetoServer::OnReadable(KinetoSocket socket) {
  const int fd = socket == KinetoSocket::kAbstract ? abstract_fd_.get() : path_fd_.get();
  for (int i = 0; i < options_.max_datagrams_per_wakeup; ++i) {
    if (!ReceiveOne(socket, fd)) return;
  }
}

bool KinetoServer::ReceiveOne(KinetoSocket socket, int fd) {
  // One byte more than the largest valid datagram tells a longer one apart.
  std::array<uint8_t, kMaxDatagramBytes + 1> buffer;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(sizeof(int) * kMaxStrayFds)];
  sockaddr_un from = {};
  iovec iov{buffer.data(), buffer.size()};
  msghdr msg = {};
  msg.msg_name = &from;
  msg.msg_namelen = sizeof(from);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
  if (n < 0) return errno == EINTR;
  std::optional<PeerCredentials> creds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET) continue;
    if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(ucred))) {
      ucred cred;
      std::memcpy(&cred, CMSG_DATA(c), sizeof(cred));
      creds = PeerCredentials{.pid = cred.pid, .uid = cred.uid, .gid = cred.gid};
    } else if (c->cmsg_type == SCM_RIGHTS) {
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t k = 0; k < count; ++k) {
        int stray;
        std::memcpy(&stray, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
        close(stray);
      }
    }
  }
  const size_t size = static_cast<size_t>(n);
  absl::StatusOr<KinetoMessage> decoded =
      size > buffer.size() ? absl::InvalidArgumentError("kineto datagram too long")
                           : DecodeDatagram({buffer.data(), size});
  if (!decoded.ok() || !creds.has_value() || creds->pid <= 0) {
    ++malformed_;
    return true;
  }
  std::optional<std::string> reply = handler_->OnDatagram(*creds, *decoded, socket);
  // An unbound sender has no address to answer.
  if (reply.has_value() && msg.msg_namelen > offsetof(sockaddr_un, sun_path)) {
    Reply(fd, from, msg.msg_namelen, *reply);
  }
  return true;
}

void KinetoServer::Reply(int fd, const sockaddr_un& to, socklen_t to_len,
                         const std::string& reply) {
  // Never waits: a full receive queue loses this reply, and the process
  // polls again.
  sendto(fd, reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
         reinterpret_cast<const sockaddr*>(&to), to_len);  // NOLINT
}

v1::KinetoBridgeStatus KinetoServer::Status() const {
  v1::KinetoBridgeStatus status;
  status.set_mode(KinetoModeName(options_.mode));
  status.set_abstract_socket(abstract_fd_.get() >= 0);
  status.set_socket_path(path_);
  status.set_message(unavailable_);
  if (options_.mode == KinetoMode::kOff) {
    status.set_state("off");
  } else if (!serving()) {
    status.set_state("unavailable");
  } else if (!unavailable_.empty()) {
    status.set_state("partial");
  } else {
    status.set_state("serving");
  }
  return status;
}

}  // namespace gpuctl::daemon::kineto
