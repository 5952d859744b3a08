#include "daemon/ipc/ipc_server.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"

namespace gpuctl::daemon {
namespace {

using v1::ipc::ClientMessage;

constexpr int kListenBacklog = 128;
constexpr int kMaxAcceptsPerWake = 64;
// Bounds the time one busy peer holds the loop; the rest is read on the
// next (level-triggered) wake-up.
constexpr int kMaxDatagramsPerWake = 32;
constexpr absl::Duration kAcceptRetryDelay = absl::Milliseconds(100);
absl::string_view MessageName(const ClientMessage& msg) {
  switch (msg.msg_case()) {
    case ClientMessage::kHello:
      return "Hello";
    case ClientMessage::kCaptureStarted:
      return "CaptureStarted";
    case ClientMessage::kCaptureResult:
      return "CaptureResult";
    case ClientMessage::kPayloadChunk:
      return "PayloadChunk";
    case ClientMessage::kGoodbye:
      return "Goodbye";
    case ClientMessage::MSG_NOT_SET:
      break;
  }
  return "unknown message";
}

}  // namespace

absl::StatusOr<std::unique_ptr<IpcServer>> IpcServer::Create(const IpcServerOptions& options,
                                                             EventLoop* loop) {
  absl::StatusOr<UniqueFd> fd =
      ListenSeqpacket(options.socket_path, kListenBacklog, options.access);
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<IpcServer>(new IpcServer(options, loop, std::move(*fd)));
}

IpcServer::IpcServer(const IpcServerOptions& options, EventLoop* loop, UniqueFd listen_fd)
    : options_(options),
      loop_(loop),
      listen_fd_(std::move(listen_fd)),
      recv_buffer_(kMaxIpcMessageBytes + 1),
      hello_limiter_(options.hello_rate, options.hello_burst),
      self_(std::make_shared<IpcServer*>(this)) {}

IpcServer::~IpcServer() { Stop(); }

absl::Status IpcServer::Start(DaemonCore* core) {
  if (!listen_fd_.valid()) return absl::FailedPreconditionError("IPC server is stopped");
  core_ = core;
  inline_ = std::make_unique<InlineAssembler>(&core->ingest(), loop_,
                                              [this](PeerId id) { OnInlineAdmitted(id); });
  absl::Status s =
      loop_->AddFd(listen_fd_.get(), EPOLLIN, [this](uint32_t) { OnListenReadable(); });
  listening_ = s.ok();
  return s;
}

void IpcServer::Stop() {
  if (listen_fd_.valid()) {
    if (listening_) loop_->RemoveFd(listen_fd_.get());
    listening_ = false;
    listen_fd_.Reset();
    unlink(options_.socket_path.c_str());
  }
  for (auto& [id, peer] : peers_) {
    peer->closed = true;
    loop_->RemoveFd(peer->fd.get());
    if (peer->hello_timer != 0) loop_->Cancel(peer->hello_timer);
    peer->fd.Reset();
  }
  peers_.clear();
  inline_.reset();
}

void IpcServer::OnListenReadable() {
  for (int i = 0; i < kMaxAcceptsPerWake && listening_; ++i) {
    int fd = accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      AcceptOne(UniqueFd(fd));
      continue;
    }
    int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK) return;
    if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
    // Out of descriptors or memory: the pending connection stays readable,
    // so back off instead of spinning on it.
    LogWarning("cannot accept IPC connection", {{"error", std::strerror(err)}});
    PauseAccepting();
    return;
  }
}

void IpcServer::PauseAccepting() {
  loop_->RemoveFd(listen_fd_.get());
  listening_ = false;
  std::weak_ptr<IpcServer*> weak = self_;
  loop_->PostDelayed(kAcceptRetryDelay, [weak] {
    std::shared_ptr<IpcServer*> self = weak.lock();
    if (self == nullptr || !(*self)->listen_fd_.valid() || (*self)->listening_) return;
    IpcServer* server = *self;
    server->listening_ = server->loop_
                             ->AddFd(server->listen_fd_.get(), EPOLLIN,
                                     [server](uint32_t) { server->OnListenReadable(); })
                             .ok();
  });
}

void IpcServer::AcceptOne(UniqueFd fd) {
  if (peers_.size() >= options_.max_peers) {
    LogWarning("refusing IPC connection: too many peers", {{"max_peers", options_.max_peers}});
    return;
  }
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred)) {
    LogWarning("refusing IPC connection: no peer credentials", {{"error", std::strerror(errno)}});
    return;
  }
  auto peer = std::make_shared<Peer>();
  peer->id = next_peer_id_++;
  peer->creds = PeerCredentials{cred.pid, cred.uid, cred.gid};
  PeerId id = peer->id;
  absl::Status added = loop_->AddFd(fd.get(), EPOLLIN | EPOLLRDHUP,
                                    [this, id](uint32_t events) { OnPeerEvent(id, events); });
  if (!added.ok()) {
    LogWarning("refusing IPC connection", {{"error", added.ToString()}});
    return;
  }
  peer->fd = std::move(fd);
  std::weak_ptr<IpcServer*> weak = self_;
  peer->hello_timer = loop_->PostDelayed(options_.hello_timeout, [weak, id] {
    std::shared_ptr<IpcServer*> self = weak.lock();
    if (self == nullptr) return;
    auto it = (*self)->peers_.find(id);
    if (it == (*self)->peers_.end() || it->second->accepted) return;
    it->second->hello_timer = 0;
    (*self)->DropPeer(it->second, "no Hello before the deadline", Notify::kNow);
  });
  LogDebug("IPC connection", {{"peer", id}, {"pid", cred.pid}, {"uid", cred.uid}});
  peers_.emplace(id, std::move(peer));
}

void IpcServer::OnPeerEvent(PeerId id, uint32_t events) {
  auto it = peers_.find(id);
  if (it == peers_.end()) return;
  std::shared_ptr<Peer> peer = it->second;
  for (int i = 0; i < kMaxDatagramsPerWake && !peer->closed && !peer->paused; ++i) {
    Datagram dgram;
    switch (ReceiveDatagram(peer->fd.get(), absl::MakeSpan(recv_buffer_), &dgram)) {
      case RecvResult::kWouldBlock:
        return;
      case RecvResult::kEof:
        ClosePeer(peer, peer->clean, peer->clean ? "closed after Goodbye" : "connection closed",
                  Notify::kNow);
        return;
      case RecvResult::kError:
        if (errno == ECONNRESET) {
          // The process is gone (it exited or exec'd with data unread):
          // an ordinary end, not the peer's fault.
          ClosePeer(peer, /*clean=*/false, "connection reset (the process exited)", Notify::kNow);
          return;
        }
        DropPeer(peer, absl::StrCat("receive failed: ", std::strerror(errno)), Notify::kNow);
        return;
      case RecvResult::kDatagram:
        break;
    }
    if (dgram.truncated || dgram.size > kMaxIpcMessageBytes) {
      DropPeer(peer, absl::StrCat("datagram larger than ", kMaxIpcMessageBytes, " bytes"),
               Notify::kNow);
      return;
    }
    // The control buffer is sized for one descriptor but, by alignment, can
    // hold two; anything past that arrives as MSG_CTRUNC.
    if (dgram.control_truncated || dgram.fds.size() > 1) {
      DropPeer(peer, "more than one file descriptor in a datagram", Notify::kNow);
      return;
    }
    if (!HandleDatagram(peer, absl::MakeConstSpan(recv_buffer_.data(), dgram.size),
                        std::move(dgram.fds))) {
      return;
    }
  }
}

bool IpcServer::HandleDatagram(const std::shared_ptr<Peer>& peer, absl::Span<const uint8_t> data,
                               std::vector<UniqueFd> fds) {
  ClientMessage msg;
  if (!msg.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
    DropPeer(peer, "malformed message", Notify::kNow);
    return false;
  }
  const bool may_carry_fd = (msg.has_capture_result() && msg.capture_result().transport() ==
                                                             v1::ipc::PAYLOAD_TRANSPORT_MEMFD) ||
                            (msg.has_hello() && msg.hello().step_counter());
  if (!fds.empty() && !may_carry_fd) {
    DropPeer(peer, absl::StrCat("unexpected file descriptor on ", MessageName(msg)), Notify::kNow);
    return false;
  }
  if (!peer->accepted && !msg.has_hello()) {
    DropPeer(peer, absl::StrCat("expected Hello, got ", MessageName(msg)), Notify::kNow);
    return false;
  }
  switch (msg.msg_case()) {
    case ClientMessage::kHello:
      if (peer->accepted) {
        DropPeer(peer, "duplicate Hello", Notify::kNow);
        return false;
      }
      return HandleHello(peer, msg.hello(), std::move(fds));
    case ClientMessage::kCaptureStarted:
      core_->OnCaptureStarted(peer->id, msg.capture_started());
      return !peer->closed;
    case ClientMessage::kCaptureResult:
      return HandleResult(peer, msg.capture_result(), std::move(fds));
    case ClientMessage::kPayloadChunk:
      return HandleChunk(peer, msg.payload_chunk());
    case ClientMessage::kGoodbye:
      peer->clean = true;
      LogDebug("peer said goodbye", {{"pid", peer->creds.pid}, {"reason", msg.goodbye().reason()}});
      return true;
    case ClientMessage::MSG_NOT_SET:
      // A message type newer than this daemon: skipped, like unknown fields.
      LogDebug("ignoring unknown IPC message", {{"pid", peer->creds.pid}});
      return true;
  }
  return true;
}

void IpcServer::ClosePeer(const std::shared_ptr<Peer>& peer_ref, bool clean,
                          absl::string_view reason, Notify notify) {
  // `peer_ref` may be the map's own reference, which the erase below
  // destroys.
  // NOLINTNEXTLINE(performance-unnecessary-copy-initialization)
  const std::shared_ptr<Peer> peer = peer_ref;
  if (peer->closed) return;
  peer->closed = true;
  loop_->RemoveFd(peer->fd.get());
  if (peer->hello_timer != 0) loop_->Cancel(peer->hello_timer);
  peer->hello_timer = 0;
  peer->fd.Reset();
  peers_.erase(peer->id);
  // After the erase: the budget it frees may resume other peers.
  if (inline_ != nullptr) inline_->Abandon(peer->id);
  if (!peer->accepted || core_ == nullptr) return;
  LogDebug("IPC peer closed",
           {{"pid", peer->creds.pid}, {"clean", clean ? "true" : "false"}, {"reason", reason}});
  if (notify == Notify::kNow) {
    core_->OnPeerGone(peer->id, clean, reason);
    return;
  }
  std::weak_ptr<IpcServer*> weak = self_;
  loop_->Post([weak, id = peer->id, clean, reason = std::string(reason)] {
    std::shared_ptr<IpcServer*> self = weak.lock();
    if (self != nullptr && (*self)->core_ != nullptr) (*self)->core_->OnPeerGone(id, clean, reason);
  });
}

void IpcServer::DropPeer(const std::shared_ptr<Peer>& peer, absl::string_view reason,
                         Notify notify) {
  LogWarning("dropping peer", {{"pid", peer->creds.pid}, {"peer", peer->id}, {"reason", reason}});
  ClosePeer(peer, /*clean=*/false, reason, notify);
}

absl::Status IpcServer::SendTo(Peer& peer, const v1::ipc::DaemonMessage& message) {
  std::string bytes;
  if (!message.SerializeToString(&bytes)) return absl::InternalError("cannot encode message");
  if (bytes.size() > kMaxIpcMessageBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("message of ", bytes.size(), " bytes exceeds the IPC limit"));
  }
  ssize_t n;
  do {
    n = send(peer.fd.get(), bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n >= 0) return absl::OkStatus();
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    return absl::UnavailableError("peer's socket buffer is full (process stuck?)");
  }
  if (errno == EPIPE || errno == ECONNRESET) {
    return absl::FailedPreconditionError("the process closed its connection");
  }
  return absl::UnavailableError(absl::StrCat("send failed: ", std::strerror(errno)));
}

absl::Status IpcServer::Send(PeerId id, const v1::ipc::DaemonMessage& message) {
  auto it = peers_.find(id);
  if (it == peers_.end()) return absl::NotFoundError(absl::StrCat("no IPC peer ", id));
  std::shared_ptr<Peer> peer = it->second;
  absl::Status s = SendTo(*peer, message);
  if (absl::IsFailedPrecondition(s)) {
    // The process closed its end (exited, or exec'd before HelloAck).
    ClosePeer(peer, /*clean=*/false, s.message(), Notify::kPosted);
  } else if (!s.ok() && !absl::IsInvalidArgument(s)) {
    DropPeer(peer, s.message(), Notify::kPosted);
  }
  return s;
}

void IpcServer::Disconnect(PeerId id, absl::string_view reason) {
  auto it = peers_.find(id);
  if (it == peers_.end()) return;
  std::shared_ptr<Peer> peer = it->second;
  LogInfo("disconnecting peer", {{"pid", peer->creds.pid}, {"reason", reason}});
  ClosePeer(peer, peer->clean, reason, Notify::kPosted);
}

}  // namespace gpuctl::daemon
