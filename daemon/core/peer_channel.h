#ifndef GPUCTL_DAEMON_CORE_PEER_CHANNEL_H_
#define GPUCTL_DAEMON_CORE_PEER_CHANNEL_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gpuctl/v1/ipc.pb.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon {

// Identifies one IPC connection for its whole life; never reused.
using PeerId = uint64_t;

// Peers of the kineto bridge (daemon/kineto) carry this bit; the IPC
// server's count up from 1 and never reach it, so the two never collide.
inline constexpr PeerId kKinetoPeerBit = PeerId{1} << 62;
inline bool IsKinetoPeer(PeerId peer) { return (peer & kKinetoPeerBit) != 0; }
// A kineto peer's StartCapture.activities also carry the request's
// kineto_options, each as this prefix and its name; they never reach a
// library process.
inline constexpr char kKinetoOptionPrefix[] = "kineto.";
// TraceRequest.kineto_options's names.
inline constexpr const char* kKinetoOptionNames[] = {
    "with_stack", "record_shapes", "profile_memory", "with_flops", "with_modules"};

// What the kernel says about the peer (SO_PEERCRED); never what it claims.
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// What a payload already is when the adapter hands it over: a kineto
// trace that the bridge has validated, tagged and compressed. Only the
// bridge creates one; the IPC server's payloads are always records.
struct PreparedTrace {
  uint64_t event_count = 0;
  // The size of the file the process wrote, before compression.
  uint64_t source_bytes = 0;
};

// A received capture payload. The bytes stay valid and unchanged for the
// object's lifetime (a sealed, read-only mapping or an owned buffer).
class Payload {
 public:
  virtual ~Payload() = default;
  // Binary records (proto/gpuctl/v1/records.h), or with prepared() the
  // stored file itself.
  virtual absl::Span<const uint8_t> bytes() const = 0;
  // Non-null: bytes() is a finished trace file, stored as it is.
  virtual const PreparedTrace* prepared() const { return nullptr; }
  // The DaemonCore::ingest() entry that already counts these bytes (an
  // inline payload is admitted before it is read), or 0. The core converts
  // such a payload at once under that entry instead of queueing it again;
  // the entry is released when the payload is dropped or converted.
  virtual uint64_t ingest_id() const { return 0; }
};

// How the core talks to attached processes. Implemented by the IPC server
// and the kineto bridge (a PeerRouter in front of both). Called on the
// daemon's event-loop thread only.
class PeerChannel {
 public:
  virtual ~PeerChannel() = default;
  virtual absl::Status Send(PeerId peer, const v1::ipc::DaemonMessage& message) = 0;
  // Closes the connection; the core is told through DaemonCore::OnPeerGone.
  virtual void Disconnect(PeerId peer, absl::string_view reason) = 0;
  // The earliest instant `peer` can open a time window asked for at `now`
  // (a polling peer hears of it only at its next poll, then warms up).
  virtual absl::Time EarliestStart(PeerId peer, absl::Time now) { return now; }
  // Adds what the channel knows of `peer` (its kind, whether its profiler
  // is busy) to a listing of it.
  virtual void DescribePeer(PeerId peer, v1::ProcessInfo* info) {}
  // Adds the channel's own state to the daemon's status.
  virtual void DescribeStatus(v1::GetStatusResponse* status) {}
  // Why `peer` has sent no result for `trace_id` by the trace's deadline,
  // as far as the channel knows (for the timed-out result's message); ""
  // when it knows nothing more than the core. Called before the capture is
  // cancelled.
  virtual std::string ExplainMissingResult(PeerId peer, absl::string_view trace_id) { return ""; }
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_PEER_CHANNEL_H_
