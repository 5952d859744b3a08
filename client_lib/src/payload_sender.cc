#include "client_lib/src/payload_sender.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

namespace gpuctl::client {

int CreateSealedMemfd(const std::string& payload) {
  const int fd = memfd_create("gpuctl-trace", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  size_t written = 0;
  while (written < payload.size()) {
    const ssize_t n = write(fd, payload.data() + written, payload.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      return -1;
    }
    written += static_cast<size_t>(n);
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

IoResult SendClientMessage(IpcConnection& conn, const wire::ClientMessage& message, int pass_fd,
                           int timeout_ms, const std::atomic<bool>* cancel) {
  std::string bytes;
  wire::Encode(message, &bytes);
  if (bytes.size() > wire::kMaxIpcMessageBytes) return IoResult::kError;
  return conn.Send(bytes, pass_fd, timeout_ms, cancel);
}

IoResult SendCaptureResultWithPayload(IpcConnection& conn, wire::CaptureResult result,
                                      const std::string& payload, bool force_inline, int timeout_ms,
                                      const std::atomic<bool>* cancel) {
  result.payload_size = payload.size();
  const int memfd = force_inline ? -1 : CreateSealedMemfd(payload);
  if (memfd >= 0) {
    result.transport = static_cast<int32_t>(wire::PayloadTransport::kMemfd);
    const IoResult sent = SendClientMessage(conn, result, memfd, timeout_ms, cancel);
    close(memfd);  // the daemon holds its own reference once sent
    return sent;
  }
  result.transport = static_cast<int32_t>(wire::PayloadTransport::kInline);
  const std::string trace_id = result.trace_id;
  IoResult sent = SendClientMessage(conn, std::move(result), -1, timeout_ms, cancel);
  for (size_t offset = 0; sent == IoResult::kOk && offset < payload.size();
       offset += kMaxChunkBytes) {
    wire::PayloadChunk chunk;
    chunk.trace_id = trace_id;
    chunk.offset = offset;
    chunk.data = payload.substr(offset, std::min(kMaxChunkBytes, payload.size() - offset));
    sent = SendClientMessage(conn, std::move(chunk), -1, timeout_ms, cancel);
  }
  return sent;
}

}  // namespace gpuctl::client
