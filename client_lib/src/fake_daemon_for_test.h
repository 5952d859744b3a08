// Test-only daemon side of the IPC protocol: a SOCK_SEQPACKET listener in a
// temp dir speaking the wire codec. Every wait has a deadline.
#ifndef GPUCTL_CLIENT_LIB_SRC_FAKE_DAEMON_FOR_TEST_H_
#define GPUCTL_CLIENT_LIB_SRC_FAKE_DAEMON_FOR_TEST_H_

#include <unistd.h>

#include <cstdint>
#include <optional>
#include <string>

#include "client_lib/src/wire/ipc_messages.h"

namespace gpuctl::client::testing {

// Generous: tests run under sanitizers on a loaded 2-core machine.
inline constexpr int kWaitMs = 20'000;

struct Received {
  wire::ClientMessage message;
  int fd = -1;  // SCM_RIGHTS descriptor, owned by the caller
};

// Waits until this process's thread named `name` is blocked in system call
// `syscall_number` (as /proc/self/task/*/syscall reports it). A test that
// forks waits for the agent thread to sit in ppoll first, so that the fork
// does not land inside one of its allocations (see fork_safety_for_test.h).
bool WaitUntilThreadBlockedIn(const std::string& name, int64_t syscall_number,
                              int timeout_ms = kWaitMs);

// A fresh private directory for sockets, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class FakeDaemon {
 public:
  explicit FakeDaemon(std::string socket_path);
  ~FakeDaemon();  // closes everything and unlinks the socket

  bool listening() const { return listen_fd_ >= 0; }
  // Accepts the next connection (replacing the current one).
  bool Accept(int timeout_ms = kWaitMs);
  // Accept, receive Hello, reply HelloAck.
  bool Handshake(int timeout_ms = kWaitMs);
  const wire::Hello& hello() const { return hello_; }
  // The descriptor that came with the last Hello (the step page), or -1;
  // owned by the fake daemon.
  int hello_fd() const { return hello_fd_; }
  int conn_fd() const { return conn_fd_; }

  std::optional<Received> Receive(int timeout_ms = kWaitMs);
  // Skips CaptureStarted/PayloadChunk/... until a message of type T.
  template <typename T>
  std::optional<T> ReceiveA(int timeout_ms = kWaitMs, int* fd = nullptr) {
    std::optional<Received> r = Receive(timeout_ms);
    if (!r.has_value()) return std::nullopt;
    if (fd != nullptr) {
      *fd = r->fd;
    } else if (r->fd >= 0) {
      close(r->fd);
    }
    if (const T* t = std::get_if<T>(&r->message)) return *t;
    return std::nullopt;
  }

  bool Send(const wire::DaemonMessage& message);
  bool SendRaw(const std::string& bytes);
  // True when the client closed the connection (EOF) within the timeout.
  bool WaitPeerClosed(int timeout_ms = kWaitMs);
  void CloseConnection();
  // Makes `fd` (owned from now on) the current connection.
  void UseConnection(int fd) {
    CloseConnection();
    conn_fd_ = fd;
  }

 private:
  std::string path_;
  int listen_fd_ = -1;
  int conn_fd_ = -1;
  wire::Hello hello_;
  int hello_fd_ = -1;
};

}  // namespace gpuctl::client::testing

#endif  // GPUCTL_CLIENT_LIB_SRC_FAKE_DAEMON_FOR_TEST_H_
