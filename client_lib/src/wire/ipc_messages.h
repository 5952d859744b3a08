// The client library's side of the IPC schema (proto/gpuctl/v1/ipc.proto):
// plain C++ types and a protobuf wire codec of its own. The client library
// must not link libprotobuf (the host process may carry its own, different
// copy); this codec is the only way it speaks the IPC schema.
//
// The types (ipc_schema.h) and the per-field encode/decode steps are
// generated from ipc.proto at build time (codegen/), so a field added there
// is in the structs, the codec and the compatibility tests with no other
// edit. Members are named as the .proto's fields, enums as its enums with
// the value prefix dropped (CAPTURE_STATUS_OK: CaptureStatus::kOk), and an
// enum-typed field holds the raw int32 value.
#ifndef GPUCTL_CLIENT_LIB_SRC_WIRE_IPC_MESSAGES_H_
#define GPUCTL_CLIENT_LIB_SRC_WIRE_IPC_MESSAGES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "client_lib/src/wire/ipc_schema.h"
#include "gpuctl/v1/limits.h"

namespace gpuctl::wire {

using ::gpuctl::ipc::kProtocolMajor;
using ::gpuctl::ipc::kProtocolMinor;
// Largest datagram either side sends or accepts.
inline constexpr size_t kMaxIpcMessageBytes = ::gpuctl::ipc::kMaxMessageBytes;

// Hello.capabilities bits (ipc.proto's Capability).
inline constexpr uint64_t kCapabilityMemfd = static_cast<uint64_t>(Capability::kMemfd);
inline constexpr uint64_t kCapabilityHostRanges = static_cast<uint64_t>(Capability::kHostRanges);
inline constexpr uint64_t kCapabilityCupti = static_cast<uint64_t>(Capability::kCupti);
inline constexpr uint64_t kCapabilityStepCounter = static_cast<uint64_t>(Capability::kStepCounter);
inline constexpr uint64_t kCapabilityStepWindows = static_cast<uint64_t>(Capability::kStepWindows);

// Appends the encoding of `message` to `out`. The bytes are those
// libprotobuf writes for the same message.
void Encode(const ClientMessage& message, std::string* out);
void Encode(const DaemonMessage& message, std::string* out);

// Decodes one whole message. Returns false on malformed input (truncated
// varints or lengths, bad wire types, lengths past the end, invalid nesting,
// a string field that is not valid UTF-8); unknown fields are skipped; as in
// protobuf, a oneof member that appears again is merged into the one already
// decoded and a different member replaces it. On false, *out is
// std::monostate. Never reads outside `bytes`.
bool Decode(std::string_view bytes, ClientMessage* out);
bool Decode(std::string_view bytes, DaemonMessage* out);

}  // namespace gpuctl::wire

#endif  // GPUCTL_CLIENT_LIB_SRC_WIRE_IPC_MESSAGES_H_
