#include "daemon/runtime/listen_probe.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpuctl::daemon {
namespace {

// errno of binding one listening socket to `ai`, 0 when it binds.
int ProbeBind(const addrinfo& ai) {
  const int fd = ::socket(ai.ai_family, ai.ai_socktype | SOCK_CLOEXEC, ai.ai_protocol);
  if (fd < 0) return errno;
  // As gRPC binds: a port left in TIME_WAIT is free, a listening one is not.
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  int error = 0;
  if (::bind(fd, ai.ai_addr, ai.ai_addrlen) != 0) error = errno;
  ::close(fd);
  return error;
}

}  // namespace

absl::Status PrepareUnixListenPath(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot stat ", path, ": ", std::strerror(errno)));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a socket; refusing to replace it"));
  }
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("Unix socket path too long: ", path));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket(): ", std::strerror(errno)));
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API's own idiom.
  const bool live = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  const int error = errno;
  ::close(fd);
  if (live || error == EAGAIN) {
    return absl::FailedPreconditionError(
        absl::StrCat(kAddressInUse, ": a server already accepts on ", path));
  }
  if (error != ECONNREFUSED) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot probe ", path, ": ", std::strerror(error)));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot remove the stale socket ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::string ListenFailureReason(const std::string& listen_address) {
  const size_t colon = listen_address.rfind(':');
  if (colon == std::string::npos) return "expected HOST:PORT";
  std::string host = listen_address.substr(0, colon);
  const std::string port = listen_address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int rc =
          ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      rc != 0) {
    return absl::StrCat("cannot resolve \"", host, "\": ", ::gai_strerror(rc));
  }
  std::string reason;
  for (const addrinfo* ai = found; ai != nullptr && reason.empty(); ai = ai->ai_next) {
    const int error = ProbeBind(*ai);
    if (error == EADDRINUSE) {
      reason = kAddressInUse;
    } else if (error != 0) {
      reason = std::strerror(error);
    }
  }
  ::freeaddrinfo(found);
  return reason;
}

}  // namespace gpuctl::daemon
