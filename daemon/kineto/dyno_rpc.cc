#include "daemon/kineto/dyno_rpc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/excerpt.h"
#include "daemon/common/log.h"
#include "daemon/kineto/dyno_rpc_listen.h"

namespace gpuctl::daemon {
namespace {

std::string AddressText(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&addr);  // NOLINT
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    return absl::StrCat(text, ":", ntohs(v4->sin_port));
  }
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&addr);  // NOLINT
  inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
  return absl::StrCat("[", text, "]:", ntohs(v6->sin6_port));
}

std::string ErrorAnswer(absl::string_view why) {
  // Plain ASCII written here, nothing quoted from the peer.
  return absl::StrCat("{\"status\": \"failed: ", why, "\"}");
}

}  // namespace

absl::StatusOr<std::unique_ptr<DynoRpcServer>> DynoRpcServer::Create(const DynoRpcOptions& options,
                                                                     EventLoop* loop,
                                                                     Handler handler) {
  absl::StatusOr<LoopbackAddress> addr = ParseDynoRpcListen(options.listen);
  if (!addr.ok()) return addr.status();
  int fd = socket(addr->storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr->storage), addr->size) != 0 ||  // NOLINT
      listen(fd, 64) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot serve dynolog's RPC on ", options.listen, ": ", strerror(err),
                     err == EADDRINUSE ? " (a dynolog, or another gpuctld, may hold it)" : ""));
  }
  sockaddr_storage bound = {};
  socklen_t bound_size = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_size);  // NOLINT
  std::unique_ptr<DynoRpcServer> server(
      new DynoRpcServer(options, loop, std::move(handler), fd, AddressText(bound)));
  if (absl::Status s =
          loop->AddFd(fd, EPOLLIN, [raw = server.get()](uint32_t) { raw->OnAcceptable(); });
      !s.ok()) {
    return s;  // the destructor closes the socket
  }
  return server;
}

DynoRpcServer::DynoRpcServer(const DynoRpcOptions& options, EventLoop* loop, Handler handler,
                             int listen_fd, std::string address)
    : options_(options),
      loop_(loop),
      handler_(std::move(handler)),
      listen_fd_(listen_fd),
      address_(std::move(address)) {}

DynoRpcServer::~DynoRpcServer() { Stop(); }

void DynoRpcServer::Stop() {
  while (!connections_.empty()) Close(connections_.begin()->first);
  if (listen_fd_ >= 0) {
    loop_->RemoveFd(listen_fd_);
    close(listen_fd_);
    listen_fd_ = -1;
  }
}

void DynoRpcServer::OnAcceptable() {
  // A few at a time, so a flood of connections does not hold the loop.
  for (int i = 0; i < 16; ++i) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a connection already gone
    if (connections_.size() >= options_.max_connections) {
      LogWarning("dyno RPC: too many connections; closing a new one",
                 {{"max", options_.max_connections}});
      close(fd);
      continue;
    }
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    if (!loop_
             ->AddFd(fd, EPOLLIN | EPOLLRDHUP,
                     [this, fd](uint32_t events) { OnConnectionEvent(fd, events); })
             .ok()) {
      close(fd);
      continue;
    }
    c->timer = loop_->PostDelayed(options_.idle_timeout, [this, fd] {
      if (auto it = connections_.find(fd); it != connections_.end()) {
        it->second->timer = 0;
        Close(fd);
      }
    });
    connections_.emplace(fd, std::move(c));
  }
}

void DynoRpcServer::OnConnectionEvent(int fd, uint32_t events) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  Connection& c = *it->second;
  bool keep = true;
  if (!c.out.empty()) {
    keep = (events & (EPOLLERR | EPOLLHUP)) == 0 && WriteAnswer(c);
  } else if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)) != 0) {
    keep = ReadRequest(c);
  }
  if (!keep) Close(fd);
}

bool DynoRpcServer::ReadRequest(Connection& c) {
  char buf[16 << 10];
  for (;;) {
    size_t want = sizeof(int32_t) - std::min(c.in.size(), sizeof(int32_t));
    if (want == 0) {
      int32_t size = 0;
      std::memcpy(&size, c.in.data(), sizeof(size));  // host byte order, as dynolog
      if (size <= 0 || static_cast<size_t>(size) > options_.max_message_bytes) {
        Answer(c, ErrorAnswer(absl::StrCat("a message of ", size, " bytes; at most ",
                                           options_.max_message_bytes, " are accepted")));
        return WriteAnswer(c);
      }
      const size_t total = sizeof(int32_t) + static_cast<size_t>(size);
      if (c.in.size() == total) {
        Answer(c, handler_(absl::string_view(c.in).substr(sizeof(int32_t))));
        return WriteAnswer(c);
      }
      want = total - c.in.size();
    }
    ssize_t n = recv(c.fd, buf, std::min(want, sizeof(buf)), 0);
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    return false;  // closed before a whole request, or broken
  }
}

void DynoRpcServer::Answer(Connection& c, const std::string& body) {
  const int32_t size = static_cast<int32_t>(body.size());
  char header[sizeof(size)];
  std::memcpy(header, &size, sizeof(size));  // host byte order, as dynolog
  c.out.assign(header, sizeof(header));
  c.out += body;
  c.in.clear();
  (void)loop_->ModifyFd(c.fd, EPOLLOUT);
}

bool DynoRpcServer::WriteAnswer(Connection& c) {
  while (c.sent < c.out.size()) {
    ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
    if (n > 0) {
      c.sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      return true;
    } else {
      return false;
    }
  }
  shutdown(c.fd, SHUT_WR);
  return false;  // answered: one request per connection
}

void DynoRpcServer::Close(int fd) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  if (it->second->timer != 0) loop_->Cancel(it->second->timer);
  loop_->RemoveFd(fd);
  close(fd);
  connections_.erase(it);
}

}  // namespace gpuctl::daemon
