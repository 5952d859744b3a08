// One SOCK_SEQPACKET connection to the daemon: whole datagrams, optional
// SCM_RIGHTS, never SIGPIPE, EINTR retried. Owned and used by one thread
// (the agent); not thread-safe.
#ifndef GPUCTL_CLIENT_LIB_SRC_IPC_CLIENT_H_
#define GPUCTL_CLIENT_LIB_SRC_IPC_CLIENT_H_

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "client_lib/src/clock.h"

namespace gpuctl::client {

enum class IoResult {
  kOk,
  kWouldBlock,  // Receive: nothing queued
  kClosed,      // peer closed the connection
  kTimedOut,    // Send: no room within the timeout
  kCancelled,   // Send: the cancel flag was raised while waiting for room
  kError,       // any other failure, including an oversized datagram
};

class IpcConnection {
 public:
  // Send's timeouts are measured on `clock` (monotonic), which must outlive
  // the connection.
  explicit IpcConnection(Clock* clock) : clock_(clock) {}
  ~IpcConnection() { Close(); }
  IpcConnection(const IpcConnection&) = delete;
  IpcConnection& operator=(const IpcConnection&) = delete;

  // Opens a non-blocking, close-on-exec SOCK_SEQPACKET socket connected to
  // `path`. Returns false with `error` set (daemon absent, path too long...).
  bool Connect(const std::string& path, std::string* error);
  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  // Sends one datagram (at most wire::kMaxIpcMessageBytes), passing
  // `pass_fd` with SCM_RIGHTS when it is >= 0. Waits at most `timeout_ms`
  // for socket buffer room, on the clock; a non-null `cancel` raised
  // meanwhile ends the wait within kCancelCheckMs (kCancelled).
  IoResult Send(std::string_view datagram, int pass_fd, int timeout_ms,
                const std::atomic<bool>* cancel = nullptr);
  static constexpr int kCancelCheckMs = 50;

  // Receives one queued datagram without blocking. File descriptors sent
  // along are closed; a datagram longer than kMaxIpcMessageBytes is kError.
  IoResult Receive(std::string* datagram);

  void Close();
  // Forgets the descriptor without closing it (the caller closed it).
  void Release() { fd_ = -1; }

 private:
  Clock* const clock_;
  int fd_ = -1;
  // Receives land here, then only the datagram's bytes are copied out. It
  // is allocated once and never zeroed: the kernel writes the few bytes a
  // message has, so the process keeps one or two resident pages instead of
  // zero-filling (and, after malloc has trimmed the freed block, faulting
  // in) 64 KiB on every wake-up.
  std::unique_ptr<char[]> receive_buffer_;
};

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_IPC_CLIENT_H_
