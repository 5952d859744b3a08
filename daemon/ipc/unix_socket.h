#ifndef GPUCTL_DAEMON_IPC_UNIX_SOCKET_H_
#define GPUCTL_DAEMON_IPC_UNIX_SOCKET_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "daemon/ipc/socket_access.h"

namespace gpuctl::daemon {

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = other.Release();
    }
    return *this;
  }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Reset();

 private:
  int fd_ = -1;
};

// Creates a listening, non-blocking, close-on-exec SOCK_SEQPACKET socket at
// `path`. The parent directory is created or checked by
// PrepareSocketDirectory (socket_access.h). An existing socket file is
// replaced only when nothing accepts connections on it; a live listener
// (another daemon) or a path that is not a socket is an error
// (FAILED_PRECONDITION) naming the path. The socket file gets `access`'s
// group and mode before it listens.
absl::StatusOr<UniqueFd> ListenSeqpacket(const std::string& path, int backlog,
                                         const SocketAccess& access = {});

// One datagram read with recvmsg. `fds` holds every descriptor that arrived
// with it (already owned, close-on-exec), even when it is otherwise refused.
struct Datagram {
  size_t size = 0;
  bool truncated = false;          // MSG_TRUNC: larger than the buffer
  bool control_truncated = false;  // MSG_CTRUNC: more descriptors than allowed
  std::vector<UniqueFd> fds;
};

enum class RecvResult { kDatagram, kWouldBlock, kEof, kError };

// Non-blocking receive of one datagram into `buffer`, with control space for
// one descriptor (alignment may let a second one through: callers check
// fds.size()). On kError, errno describes the failure.
RecvResult ReceiveDatagram(int fd, absl::Span<uint8_t> buffer, Datagram* out);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_IPC_UNIX_SOCKET_H_
