// Hands a finished capture payload to the daemon: a sealed memfd passed
// with the CaptureResult (no copy through the socket), or, when memfd is
// unavailable or inline transport is forced, the CaptureResult followed by
// PayloadChunk datagrams.
#ifndef GPUCTL_CLIENT_LIB_SRC_PAYLOAD_SENDER_H_
#define GPUCTL_CLIENT_LIB_SRC_PAYLOAD_SENDER_H_

#include <string>

#include "client_lib/src/ipc_client.h"
#include "client_lib/src/wire/ipc_messages.h"

namespace gpuctl::client {

// Data bytes per PayloadChunk; leaves room for the rest of the message in
// one kMaxIpcMessageBytes datagram.
inline constexpr size_t kMaxChunkBytes = 60000;

// Returns a memfd holding exactly `payload`, sealed against shrink, grow,
// write and further sealing; -1 when memfd or sealing is unavailable.
int CreateSealedMemfd(const std::string& payload);

// Sends `result` (transport and payload_size filled in here) and the
// payload. `timeout_ms` bounds the wait for socket room per datagram: the
// daemon stops reading an inline payload while its ingest budget is spent,
// so that wait can be long. A raised `cancel` ends it (kCancelled).
IoResult SendCaptureResultWithPayload(IpcConnection& conn, wire::CaptureResult result,
                                      const std::string& payload, bool force_inline, int timeout_ms,
                                      const std::atomic<bool>* cancel = nullptr);

// Sends one message, checking it fits in a datagram.
IoResult SendClientMessage(IpcConnection& conn, const wire::ClientMessage& message, int pass_fd,
                           int timeout_ms, const std::atomic<bool>* cancel = nullptr);

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_PAYLOAD_SENDER_H_
