#ifndef GPUCTL_DAEMON_KINETO_DYNO_RPC_LISTEN_H_
#define GPUCTL_DAEMON_KINETO_DYNO_RPC_LISTEN_H_

#include <sys/socket.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuctl::daemon {

// dynolog's own port.
inline constexpr char kDefaultDynoRpcListen[] = "127.0.0.1:1778";

struct LoopbackAddress {
  sockaddr_storage storage = {};
  socklen_t size = 0;
};

// `listen` as a socket address when it is a loopback HOST:PORT (127.x.y.z,
// ::1 or [::1], localhost; port 0-65535); otherwise INVALID_ARGUMENT saying
// why. dynolog's RPC has no authentication: it never leaves the host.
absl::StatusOr<LoopbackAddress> ParseDynoRpcListen(absl::string_view listen);
absl::Status CheckDynoRpcListen(absl::string_view listen);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_KINETO_DYNO_RPC_LISTEN_H_
