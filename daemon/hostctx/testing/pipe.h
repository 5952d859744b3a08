#ifndef GPUCTL_DAEMON_HOSTCTX_TESTING_PIPE_H_
#define GPUCTL_DAEMON_HOSTCTX_TESTING_PIPE_H_

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "gtest/gtest.h"

// How the sampler tests talk to the processes they fork.
namespace gpuctl::hostctx::testing {

// A pipe whose ends close with it.
struct Pipe {
  Pipe() { EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0); }
  ~Pipe() {
    close(fds[0]);
    close(fds[1]);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  int fds[2] = {-1, -1};
};

// Reads one value of `T` from `fd`, waiting at most 10 s.
template <typename T>
bool ReadWithDeadline(int fd, T* value) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 10000) != 1) return false;
  return read(fd, value, sizeof(T)) == static_cast<ssize_t>(sizeof(T));
}

}  // namespace gpuctl::hostctx::testing

#endif  // GPUCTL_DAEMON_HOSTCTX_TESTING_PIPE_H_
