#ifndef GPUCTL_DAEMON_IPC_IPC_SERVER_H_
#define GPUCTL_DAEMON_IPC_IPC_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/common/clock.h"
#include "daemon/common/event_loop.h"
#include "daemon/core/daemon_core.h"
#include "daemon/core/peer_channel.h"
#include "daemon/core/registry.h"
#include "daemon/ipc/hello_rate_limiter.h"
#include "daemon/ipc/inline_assembly.h"
#include "daemon/ipc/socket_access.h"
#include "daemon/ipc/unix_socket.h"
#include "gpuctl/v1/ipc.pb.h"
#include "gpuctl/v1/limits.h"

namespace gpuctl::daemon {

inline constexpr char kDefaultSocketPath[] = "/run/gpuctl/gpuctl.sock";
// ipc.hello_rate / --hello-rate: Hellos a second per uid, 0 (no limit) to
// kMaxHelloRate; ipc.hello_burst / --hello-burst: 1 to kMaxHelloBurst.
inline constexpr uint32_t kDefaultHelloRate = 200;
inline constexpr uint32_t kDefaultHelloBurst = 2000;
inline constexpr uint32_t kMaxHelloRate = 1000000;
inline constexpr uint32_t kMaxHelloBurst = 1000000;

struct IpcServerOptions {
  std::string socket_path;
  std::string daemon_version;
  // Largest capture payload accepted (announced in HelloAck).
  uint64_t max_payload_bytes = kDefaultMaxPayloadBytes;
  // A connection that has not sent Hello by then is dropped.
  absl::Duration hello_timeout = absl::Seconds(5);
  // Connections beyond this are accepted and closed at once.
  size_t max_peers = 4096;
  // Hellos per uid (ipc.hello_rate, ipc.hello_burst): a bucket of
  // `hello_burst` refilled at `hello_rate` a second; a Hello beyond it is
  // refused (HelloRejected, REJECT_REASON_RATE_LIMITED) and the library
  // retries after its longest backoff. hello_rate 0: no limit.
  double hello_rate = kDefaultHelloRate;
  double hello_burst = kDefaultHelloBurst;
  // The time source for the Hello rate limit; null: CLOCK_MONOTONIC.
  Clock* clock = nullptr;
  // The socket file's mode and group (its directory is checked too).
  SocketAccess access;
};

// Largest datagram either side sends (proto/gpuctl/v1/limits.h).
inline constexpr size_t kMaxIpcMessageBytes = ipc::kMaxMessageBytes;

// The IPC adapter: accepts libgpuctl connections on a SOCK_SEQPACKET Unix
// socket, validates every datagram and descriptor, and turns them into
// DaemonCore calls; implements PeerChannel for the core's replies.
//
// Threading: everything runs on `loop`'s thread (Create may run on any
// thread before the loop starts). The core is never called re-entrantly
// from inside one of its own calls into PeerChannel: OnPeerGone caused by
// Send or Disconnect is posted to the loop.
//
// A Hello with step_counter set must carry the step counter memfd; the
// server checks and maps it and hands the core a read-only view, which the
// core owns from then on.
//
// A Hello the core refuses, or one beyond the uid's Hello rate, is answered
// with HelloRejected (the status's code mapped to a RejectReason, its
// message) before the connection is closed, so the library can say why and
// stop retrying at once. A rate-limited Hello is reported to the core
// (DaemonCore::OnHelloRefused) so that it is listed with the refusals.
//
// Inline payloads are bounded by the core's ingest budget
// (DaemonCore::ingest(), trace.max_ingest_bytes), the same one the core's
// conversions wait in: a payload's whole announced size is reserved when its
// CaptureResult arrives, and its chunks are read only once it is admitted
// (FIFO; one larger than the cap is read alone when nothing else is held).
// Until then the peer is out of the poll set, so its sends block and
// nothing it sent is dropped. The reassembled payload goes to the core with
// its entry, which is released once it is converted or dropped.
//
// OnPeerGone is reported only for peers whose Hello the core accepted.
// A peer that breaks the protocol (oversize or malformed datagram, an
// unexpected or invalid descriptor, a payload that does not add up) is
// dropped with a log line `msg="dropping peer" pid=... reason="..."`; other
// peers are unaffected.
class IpcServer final : public PeerChannel {
 public:
  // The IPC protocol version announced in HelloAck.
  static constexpr uint32_t kProtocolMajor = kIpcProtocolMajor;
  static constexpr uint32_t kProtocolMinor = kIpcProtocolMinor;

  // Binds and listens (see ListenSeqpacket); accepts nothing until Start().
  static absl::StatusOr<std::unique_ptr<IpcServer>> Create(const IpcServerOptions& options,
                                                           EventLoop* loop);
  // Closes every connection without notifying the core.
  ~IpcServer() override;
  IpcServer(const IpcServer&) = delete;
  IpcServer& operator=(const IpcServer&) = delete;

  // Starts accepting. `core` (and its ingest budget) must outlive this
  // server or Stop() must run before it goes.
  absl::Status Start(DaemonCore* core);
  // Stops accepting, closes every connection and removes the socket file.
  // The core is not notified. Idempotent.
  void Stop();

  absl::Status Send(PeerId peer, const v1::ipc::DaemonMessage& message) override;
  void Disconnect(PeerId peer, absl::string_view reason) override;

  size_t peer_count() const { return peers_.size(); }
  const std::string& socket_path() const { return options_.socket_path; }

 private:
  struct Peer {
    PeerId id = 0;
    UniqueFd fd;
    PeerCredentials creds;
    bool accepted = false;  // the core accepted its Hello
    bool clean = false;     // Goodbye received
    bool closed = false;
    // Out of the poll set: its inline payload waits for room.
    bool paused = false;
    TaskRunner::TimerId hello_timer = 0;
  };
  enum class Notify { kNow, kPosted };

  IpcServer(const IpcServerOptions& options, EventLoop* loop, UniqueFd listen_fd);
  void OnListenReadable();
  void PauseAccepting();
  void AcceptOne(UniqueFd fd);
  void OnPeerEvent(PeerId id, uint32_t events);
  // Handles one datagram; returns false once the peer is closed.
  bool HandleDatagram(const std::shared_ptr<Peer>& peer, absl::Span<const uint8_t> data,
                      std::vector<UniqueFd> fds);
  // Maps the step counter the Hello shares (refusing the Hello when its
  // descriptor is missing or fails the checks), then asks the core.
  bool HandleHello(const std::shared_ptr<Peer>& peer, const v1::ipc::Hello& hello,
                   std::vector<UniqueFd> fds);
  // Answers HelloRejected and drops the peer.
  void RefuseHello(const std::shared_ptr<Peer>& peer, const absl::Status& status);
  bool HandleResult(const std::shared_ptr<Peer>& peer, const v1::ipc::CaptureResult& result,
                    std::vector<UniqueFd> fds);
  bool HandleChunk(const std::shared_ptr<Peer>& peer, const v1::ipc::PayloadChunk& chunk);
  // Starts an inline assembly; the peer is paused until its bytes fit.
  void BeginInline(Peer& peer, const v1::ipc::CaptureResult& result);
  // inline_ admitted the peer's pending payload.
  void OnInlineAdmitted(PeerId id);
  void PausePeer(Peer& peer);
  void ResumePeer(const std::shared_ptr<Peer>& peer);
  // Closes the connection and tells the core (if it knew the peer).
  void ClosePeer(const std::shared_ptr<Peer>& peer_ref, bool clean, absl::string_view reason,
                 Notify notify);
  void DropPeer(const std::shared_ptr<Peer>& peer, absl::string_view reason, Notify notify);
  absl::Status SendTo(Peer& peer, const v1::ipc::DaemonMessage& message);

  const IpcServerOptions options_;
  EventLoop* const loop_;
  UniqueFd listen_fd_;
  DaemonCore* core_ = nullptr;
  bool listening_ = false;
  PeerId next_peer_id_ = 1;
  absl::flat_hash_map<PeerId, std::shared_ptr<Peer>> peers_;
  std::vector<uint8_t> recv_buffer_;
  HelloRateLimiter hello_limiter_;
  // Made by Start (it reserves in the core's budget), gone at Stop: a
  // payload dropped later releases nothing into a core that may be gone.
  std::unique_ptr<InlineAssembler> inline_;
  // Tasks posted to the loop hold a weak reference and do nothing once the
  // server is gone.
  std::shared_ptr<IpcServer*> self_;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_IPC_IPC_SERVER_H_
