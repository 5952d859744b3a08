#include "daemon/runtime/listen_probe.h"

#include <netdb.h>
#include <sys/socket.h>
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
