// IpcServer: capture results and their payloads (a sealed memfd, or inline
// chunks read within the core's ingest budget, the peer paused meanwhile).
#include <sys/epoll.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/ipc/ipc_server.h"
#include "daemon/ipc/payload.h"

namespace gpuctl::daemon {

using v1::ipc::CaptureResult;

bool IpcServer::HandleResult(const std::shared_ptr<Peer>& peer, const CaptureResult& result,
                             std::vector<UniqueFd> fds) {
  if (inline_->HasPending(peer->id)) {
    DropPeer(peer, "CaptureResult before the previous inline payload completed", Notify::kNow);
    return false;
  }
  if (result.payload_size() > options_.max_payload_bytes) {
    DropPeer(peer,
             absl::StrCat("payload of ", result.payload_size(), " bytes exceeds the limit of ",
                          options_.max_payload_bytes),
             Notify::kNow);
    return false;
  }
  std::unique_ptr<Payload> payload;
  switch (result.transport()) {
    case v1::ipc::PAYLOAD_TRANSPORT_MEMFD: {
      if (fds.size() != 1) {
        DropPeer(peer, "MEMFD CaptureResult without a file descriptor", Notify::kNow);
        return false;
      }
      absl::StatusOr<std::unique_ptr<Payload>> mapped =
          MapSealedMemfd(fds[0].Release(), result.payload_size(), options_.max_payload_bytes);
      if (!mapped.ok()) {
        DropPeer(peer, mapped.status().message(), Notify::kNow);
        return false;
      }
      payload = std::move(*mapped);
      break;
    }
    case v1::ipc::PAYLOAD_TRANSPORT_INLINE:
      if (result.payload_size() > 0) {
        BeginInline(*peer, result);
        return true;
      }
      payload = std::make_unique<BufferPayload>(std::vector<uint8_t>());
      break;
    case v1::ipc::PAYLOAD_TRANSPORT_NONE:
      if (result.payload_size() != 0) {
        DropPeer(peer, "CaptureResult without payload announces a payload size", Notify::kNow);
        return false;
      }
      break;
    default:
      DropPeer(peer, absl::StrCat("unknown payload transport ", result.transport()), Notify::kNow);
      return false;
  }
  core_->OnCaptureResult(peer->id, result, std::move(payload));
  return !peer->closed;
}

bool IpcServer::HandleChunk(const std::shared_ptr<Peer>& peer, const v1::ipc::PayloadChunk& chunk) {
  CaptureResult result;
  absl::StatusOr<std::unique_ptr<Payload>> payload = inline_->AddChunk(peer->id, chunk, &result);
  if (!payload.ok()) {
    DropPeer(peer, payload.status().message(), Notify::kNow);
    return false;
  }
  if (*payload == nullptr) {
    if (const CaptureResult* pending = inline_->PendingResult(peer->id); pending != nullptr) {
      core_->OnPayloadProgress(peer->id, *pending, chunk.offset() + chunk.data().size());
    }
    return !peer->closed;
  }
  core_->OnCaptureResult(peer->id, result, std::move(*payload));
  return !peer->closed;
}

void IpcServer::BeginInline(Peer& peer, const CaptureResult& result) {
  if (inline_->Begin(peer.id, result)) return;
  LogInfo("inline trace data waits for room",
          {{"pid", peer.creds.pid},
           {"trace_id", result.trace_id()},
           {"payload_bytes", result.payload_size()},
           {"ingest_bytes_held", core_->ingest().running_bytes()},
           {"waiting", core_->ingest().waiting_count()}});
  PausePeer(peer);
}

void IpcServer::OnInlineAdmitted(PeerId id) {
  auto it = peers_.find(id);
  if (it == peers_.end()) return;
  std::shared_ptr<Peer> peer = it->second;
  if (peer->paused) ResumePeer(peer);
}

void IpcServer::PausePeer(Peer& peer) {
  loop_->RemoveFd(peer.fd.get());
  peer.paused = true;
}

void IpcServer::ResumePeer(const std::shared_ptr<Peer>& peer) {
  peer->paused = false;
  const PeerId id = peer->id;
  absl::Status added = loop_->AddFd(peer->fd.get(), EPOLLIN | EPOLLRDHUP,
                                    [this, id](uint32_t events) { OnPeerEvent(id, events); });
  // May run inside a core call (a Disconnect freeing budget): tell the core
  // later.
  if (!added.ok()) DropPeer(peer, added.message(), Notify::kPosted);
}

}  // namespace gpuctl::daemon
