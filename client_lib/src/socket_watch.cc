#include "client_lib/src/socket_watch.h"

#include <errno.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace gpuctl::client {

namespace {

// "/run/gpuctl/gpuctl.sock" -> "/run/gpuctl"; "a.sock" -> "."; "/x" -> "/".
std::string Parent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

bool SocketWatch::Arm() {
  if (fd_ >= 0) return true;
  const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return false;
  constexpr uint32_t kMask = IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF |
                             IN_ONLYDIR | IN_EXCL_UNLINK;
  // A directory found can be removed before it is watched (systemd
  // removing a RuntimeDirectory= and its parent): then look again, from
  // the socket up.
  for (int attempt = 0; attempt < 8; ++attempt) {
    // From the socket up to the first directory that exists.
    std::string name = BaseName(socket_path_);
    std::string directory = Parent(socket_path_);
    bool socket_directory = true;
    bool found = false;
    for (int depth = 0; depth < 64 && !name.empty(); ++depth) {
      if (access(directory.c_str(), F_OK) == 0) {
        found = true;
        break;
      }
      if (directory == "/" || directory == ".") break;
      name = BaseName(directory);
      directory = Parent(directory);
      socket_directory = false;
    }
    if (!found || name.empty()) break;
    if (inotify_add_watch(fd, directory.c_str(), kMask) < 0) {
      if (errno == ENOENT || errno == ENOTDIR) continue;
      break;
    }
    fd_ = fd;
    watched_ = std::move(directory);
    name_ = std::move(name);
    watching_socket_directory_ = socket_directory;
    return true;
  }
  close(fd);
  return false;
}

void SocketWatch::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

bool SocketWatch::Drain() {
  if (fd_ < 0) return false;
  bool relevant = false;
  bool gone = false;
  alignas(inotify_event) char buffer[4096];
  for (;;) {
    const ssize_t n = read(fd_, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const size_t size = static_cast<size_t>(n);
    for (size_t offset = 0; offset + sizeof(inotify_event) <= size;) {
      inotify_event event;
      std::memcpy(&event, buffer + offset, sizeof(event));
      const char* name = buffer + offset + sizeof(inotify_event);
      const size_t name_room = std::min<size_t>(event.len, size - offset - sizeof(inotify_event));
      offset += sizeof(inotify_event) + event.len;
      if ((event.mask & IN_Q_OVERFLOW) != 0) {
        relevant = true;  // events were lost: look now
      } else if ((event.mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) != 0) {
        relevant = true;  // the directory is gone or moved: watch again
        gone = true;
      } else if (strnlen(name, name_room) == name_.size() &&
                 std::memcmp(name, name_.data(), name_.size()) == 0) {
        relevant = true;
        // A missing directory appeared: watch inside it next.
        if (!watching_socket_directory_) gone = true;
      }
    }
  }
  if (gone) Close();
  return relevant;
}

}  // namespace gpuctl::client
