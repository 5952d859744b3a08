#ifndef GPUCTL_DAEMON_CORE_PEER_CHANNEL_H_
#define GPUCTL_DAEMON_CORE_PEER_CHANNEL_H_

#include <sys/types.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gpuctl/v1/ipc.pb.h"

namespace gpuctl::daemon {

// Identifies one IPC connection for its whole life; never reused.
using PeerId = uint64_t;

// What the kernel says about the peer (SO_PEERCRED); never what it claims.
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// A received capture payload. The bytes stay valid and unchanged for the
// object's lifetime (a sealed, read-only mapping or an owned buffer).
class Payload {
 public:
  virtual ~Payload() = default;
  virtual absl::Span<const uint8_t> bytes() const = 0;
  // The DaemonCore::ingest() entry that already counts these bytes (an
  // inline payload is admitted before it is read), or 0. The core converts
  // such a payload at once under that entry instead of queueing it again;
  // the entry is released when the payload is dropped or converted.
  virtual uint64_t ingest_id() const { return 0; }
};

// How the core talks to attached processes. Implemented by the IPC server.
// Called on the daemon's event-loop thread only.
class PeerChannel {
 public:
  virtual ~PeerChannel() = default;
  virtual absl::Status Send(PeerId peer, const v1::ipc::DaemonMessage& message) = 0;
  // Closes the connection; the core is told through DaemonCore::OnPeerGone.
  virtual void Disconnect(PeerId peer, absl::string_view reason) = 0;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_PEER_CHANNEL_H_
