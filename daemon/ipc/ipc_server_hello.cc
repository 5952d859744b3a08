// IpcServer: the Hello (rate limit, step counter page, the core's answer,
// HelloAck or HelloRejected).
#include <ctime>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/ipc/ipc_server.h"
#include "daemon/ipc/step_counter_page.h"

namespace gpuctl::daemon {
namespace {

absl::Time IpcMonotonicNow() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return absl::TimeFromTimespec(ts);
}

v1::ipc::RejectReason RejectReasonFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kPermissionDenied:
      return v1::ipc::REJECT_REASON_PERMISSION_DENIED;
    case absl::StatusCode::kFailedPrecondition:
      return v1::ipc::REJECT_REASON_PROTOCOL_VERSION;
    case absl::StatusCode::kInvalidArgument:
      return v1::ipc::REJECT_REASON_INVALID_HELLO;
    case absl::StatusCode::kResourceExhausted:
      return v1::ipc::REJECT_REASON_RATE_LIMITED;
    default:
      return v1::ipc::REJECT_REASON_UNSPECIFIED;
  }
}

}  // namespace

bool IpcServer::HandleHello(const std::shared_ptr<Peer>& peer, const v1::ipc::Hello& hello,
                            std::vector<UniqueFd> fds) {
  if (peer->hello_timer != 0) loop_->Cancel(peer->hello_timer);
  peer->hello_timer = 0;
  const absl::Time now = options_.clock != nullptr ? options_.clock->Now() : IpcMonotonicNow();
  if (!hello_limiter_.TryAcquire(peer->creds.uid, now)) {
    const absl::Status status = absl::ResourceExhaustedError(
        absl::StrCat("too many registrations from uid ", peer->creds.uid, " (more than ",
                     options_.hello_burst, " at once or ", options_.hello_rate,
                     " a second; ipc.hello_rate, ipc.hello_burst); retry later"));
    core_->OnHelloRefused(peer->creds, hello, status);
    RefuseHello(peer, status);
    return false;
  }
  std::unique_ptr<StepCounterView> steps;
  if (hello.step_counter()) {
    if (fds.size() != 1) {
      DropPeer(peer, "Hello refused: it announces a step counter but carries no file descriptor",
               Notify::kNow);
      return false;
    }
    absl::StatusOr<std::unique_ptr<StepCounterView>> mapped = MapStepCounterPage(std::move(fds[0]));
    if (!mapped.ok()) {
      DropPeer(peer, absl::StrCat("Hello refused: ", mapped.status().message()), Notify::kNow);
      return false;
    }
    steps = std::move(*mapped);
  }
  absl::Status status = core_->OnPeerHello(peer->id, peer->creds, hello, std::move(steps));
  if (peer->closed) return false;
  if (!status.ok()) {
    RefuseHello(peer, status);
    return false;
  }
  peer->accepted = true;
  v1::ipc::DaemonMessage reply;
  v1::ipc::HelloAck* ack = reply.mutable_hello_ack();
  ack->set_protocol_major(kProtocolMajor);
  ack->set_protocol_minor(kProtocolMinor);
  ack->set_daemon_version(options_.daemon_version);
  ack->set_max_payload_bytes(options_.max_payload_bytes);
  if (absl::Status s = SendTo(*peer, reply); !s.ok()) {
    if (absl::IsFailedPrecondition(s)) {
      // Gone already: what a shell execs on its way exits this fast.
      ClosePeer(peer, /*clean=*/false, s.message(), Notify::kNow);
    } else {
      DropPeer(peer, s.message(), Notify::kNow);
    }
    return false;
  }
  LogDebug("IPC peer accepted", {{"pid", peer->creds.pid},
                                 {"uid", peer->creds.uid},
                                 {"job_id", hello.job_id()},
                                 {"rank", hello.rank()}});
  return true;
}

void IpcServer::RefuseHello(const std::shared_ptr<Peer>& peer, const absl::Status& status) {
  v1::ipc::DaemonMessage reply;
  v1::ipc::HelloRejected* rejected = reply.mutable_hello_rejected();
  rejected->set_reason(RejectReasonFor(status));
  rejected->set_message(std::string(status.message()));
  rejected->set_protocol_major(kProtocolMajor);
  rejected->set_protocol_minor(kProtocolMinor);
  // Best effort: the connection closes either way.
  (void)SendTo(*peer, reply);
  DropPeer(peer, absl::StrCat("Hello refused: ", status.message()), Notify::kNow);
}

}  // namespace gpuctl::daemon
