// Limits of the IPC schema (ipc.proto) that both ends enforce: the
// protocol version, the datagram cap and the label rules. The client
// library (client_lib/src/wire), the daemon (registry, IPC server,
// selectors) and the CLI all read them from here, so a change is made once.
// Plain constants, no dependencies: the client library includes this too.
#ifndef GPUCTL_PROTO_GPUCTL_V1_LIMITS_H_
#define GPUCTL_PROTO_GPUCTL_V1_LIMITS_H_

#include <cstddef>
#include <cstdint>

namespace gpuctl::ipc {

// The IPC protocol version both ends speak (docs/protocol.md has the
// rules): a peer with another major is refused; the minor only announces
// additions. Minor 1: Hello labels and the shared step counter,
// StartCapture skew and iteration windows. Minor 2: HelloRejected.
inline constexpr uint32_t kProtocolMajor = 1;
inline constexpr uint32_t kProtocolMinor = 2;

// Largest datagram either side sends or accepts: one encoded ClientMessage
// or DaemonMessage.
inline constexpr size_t kMaxMessageBytes = size_t{64} * 1024;

// Hello.labels and selector labels (service.proto): at most kMaxLabels
// "key=value" pairs, keys of 1-kMaxLabelKeyBytes bytes of [A-Za-z0-9._/-],
// values of at most kMaxLabelValueBytes bytes of printable ASCII.
inline constexpr size_t kMaxLabels = 64;
inline constexpr size_t kMaxLabelKeyBytes = 253;
inline constexpr size_t kMaxLabelValueBytes = 253;

}  // namespace gpuctl::ipc

#endif  // GPUCTL_PROTO_GPUCTL_V1_LIMITS_H_
