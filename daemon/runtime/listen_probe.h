#ifndef GPUCTL_DAEMON_RUNTIME_LISTEN_PROBE_H_
#define GPUCTL_DAEMON_RUNTIME_LISTEN_PROBE_H_

#include <string>

#include "absl/status/status.h"

namespace gpuctl::daemon {

inline constexpr char kAddressInUse[] = "address in use";

// Why a TCP listener cannot be bound to `listen_address` ("HOST:PORT",
// "[V6]:PORT"), as the kernel says it: "address in use" when something
// already listens there (kAddressInUse), else the bind or resolution error; empty when a
// probe binds (then the cause lies elsewhere). gRPC's server builder
// reports no reason of its own. The probe releases what it binds.
std::string ListenFailureReason(const std::string& listen_address);

// Before gRPC listens on the Unix socket `path` (it removes whatever file is
// there): OK when nothing is there or a stale socket nobody accepts on
// (removed here); FAILED_PRECONDITION when a server accepts there ("address
// in use", kAddressInUse in the message) or the path is not a socket.
absl::Status PrepareUnixListenPath(const std::string& path);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_RUNTIME_LISTEN_PROBE_H_
