// Notices the daemon's socket appearing while the agent is disconnected,
// so a restarted daemon is reached at once instead of after the retry
// backoff (which grows to 30 s).
//
// An inotify watch on the socket's directory, held only while disconnected:
// connected, the process holds no watch and wakes for nothing. Events for
// other names in the directory are drained and ignored. A directory that
// does not exist (systemd removes RuntimeDirectory= while the daemon is
// stopped) is waited for from its nearest existing ancestor, one component
// at a time. When nothing can be watched (no inotify instances left) the
// agent falls back to the backoff alone.
//
// Used by the agent thread only; Abandon() (fork child) under the agent's
// descriptor lock.
#ifndef GPUCTL_CLIENT_LIB_SRC_SOCKET_WATCH_H_
#define GPUCTL_CLIENT_LIB_SRC_SOCKET_WATCH_H_

#include <string>
#include <utility>

namespace gpuctl::client {

class SocketWatch {
 public:
  explicit SocketWatch(std::string socket_path) : socket_path_(std::move(socket_path)) {}
  ~SocketWatch() { Close(); }
  SocketWatch(const SocketWatch&) = delete;
  SocketWatch& operator=(const SocketWatch&) = delete;

  // Starts watching when not already: the socket's directory, or the
  // nearest ancestor of it that exists. False when nothing can be watched
  // (then fd() is -1). Cheap when already armed.
  bool Arm();
  void Close();
  // The descriptor to poll for POLLIN; -1 when not armed.
  int fd() const { return fd_; }
  // Reads every queued event; true when one concerned the name waited for
  // (the socket: created, moved into place, its mode or owner changed; a
  // missing directory: created) or the watched directory went away. The
  // watch is then closed when it must move (deeper, or to an ancestor), to
  // be armed again before the next attempt.
  bool Drain();
  // In a fork child: closes the child's copy.
  void Abandon() { Close(); }

 private:
  const std::string socket_path_;
  int fd_ = -1;
  // What the armed watch waits for: `name_` appearing in `watched_`.
  std::string watched_;
  std::string name_;
  bool watching_socket_directory_ = false;
};

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_SOCKET_WATCH_H_
