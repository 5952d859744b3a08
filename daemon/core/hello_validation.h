#ifndef GPUCTL_DAEMON_CORE_HELLO_VALIDATION_H_
#define GPUCTL_DAEMON_CORE_HELLO_VALIDATION_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/core/peer_channel.h"
#include "daemon/core/proc_reader.h"
#include "gpuctl/v1/ipc.pb.h"
#include "gpuctl/v1/limits.h"

namespace gpuctl::daemon {

// IPC protocol version this daemon speaks (proto/gpuctl/v1/limits.h).
inline constexpr uint32_t kIpcProtocolMajor = ipc::kProtocolMajor;
inline constexpr uint32_t kIpcProtocolMinor = ipc::kProtocolMinor;

// Limits on what a Hello may carry (labels: see selector.h).
inline constexpr size_t kMaxHostnameBytes = 255;
inline constexpr size_t kMaxCmdlineArgs = 256;
inline constexpr size_t kMaxCmdlineBytes = size_t{64} * 1024;
inline constexpr size_t kMaxVersionBytes = 64;

// Checks a Hello against the kernel's credentials and the limits above:
// FAILED_PRECONDITION for another protocol major, PERMISSION_DENIED for a
// pid that is not the peer's, INVALID_ARGUMENT for oversized or bad fields
// (labels included: ipc.proto's rules).
//
// creds.pid is the peer's pid in the daemon's pid namespace; a process in a
// container claims its pid in its own namespace. A claim that differs from
// creds.pid is accepted only when `proc` says that is the peer's pid in its
// innermost namespace.
absl::Status ValidateHello(const PeerCredentials& creds, const v1::ipc::Hello& hello,
                           const ProcReader& proc);
// The same, reading the procfs at `proc_root`.
absl::Status ValidateHello(const PeerCredentials& creds, const v1::ipc::Hello& hello,
                           absl::string_view proc_root = "/proc");

// The Hello's "key=value" labels as a map, checked against ipc.proto's
// rules (INVALID_ARGUMENT naming the offending label).
absl::StatusOr<absl::btree_map<std::string, std::string>> ParseHelloLabels(
    const v1::ipc::Hello& hello);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_HELLO_VALIDATION_H_
