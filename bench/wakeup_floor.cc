// The floor under gpuctl's trigger latency on this host: N processes, each
// asleep in poll() on its own SOCK_SEQPACKET socket, as an attached
// library's agent thread is; the parent sends each one byte and each child
// reads the clock and sends it back. The latency of one round is the
// latest child's clock reading minus the parent's before its first send:
// what waking N processes one message at a time costs on this kernel and
// these cores, with no gpuctl code at all. bench/trigger_latency.py runs it
// next to gpuctl and reports the ratio.
//
//     gpuctl_wakeup_floor PROCESSES ROUNDS
//
// Prints one latency per round in microseconds, one per line.
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

int64_t RealtimeNs() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

[[noreturn]] void Child(int fd) {
  // Ends with the parent, however the parent ends.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, -1) < 0 && errno != EINTR) _exit(1);
    char byte;
    if (recv(fd, &byte, 1, 0) <= 0) _exit(0);
    const int64_t now = RealtimeNs();
    if (send(fd, &now, sizeof(now), MSG_NOSIGNAL) != sizeof(now)) _exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s PROCESSES ROUNDS\n", argv[0]);
    return 2;
  }
  const int64_t processes = std::strtoll(argv[1], nullptr, 10);
  const int64_t rounds = std::strtoll(argv[2], nullptr, 10);
  if (processes < 1 || processes > 4096 || rounds < 1 || rounds > 100000) {
    std::fprintf(stderr, "PROCESSES must be 1..4096 and ROUNDS 1..100000\n");
    return 2;
  }
  std::vector<int> parent_fds;
  std::vector<pid_t> children;
  for (int64_t i = 0; i < processes; ++i) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
      std::perror("socketpair");
      return 1;
    }
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) {
      // Only its own end: the parent's ends of earlier pairs stay shut here.
      for (int fd : parent_fds) close(fd);
      close(fds[0]);
      Child(fds[1]);
    }
    close(fds[1]);
    parent_fds.push_back(fds[0]);
    children.push_back(pid);
  }
  // Every child asleep in poll() before the first round.
  usleep(200'000);
  int status = 0;
  for (int64_t r = 0; r < rounds && status == 0; ++r) {
    const int64_t sent_at = RealtimeNs();
    for (int fd : parent_fds) {
      if (send(fd, "x", 1, MSG_NOSIGNAL) != 1) status = 1;
    }
    int64_t latest = sent_at;
    for (int fd : parent_fds) {
      int64_t woke_at = 0;
      if (recv(fd, &woke_at, sizeof(woke_at), 0) != sizeof(woke_at)) {
        status = 1;
        break;
      }
      if (woke_at > latest) latest = woke_at;
    }
    if (status == 0) std::printf("%.1f\n", static_cast<double>(latest - sent_at) / 1e3);
    usleep(50'000);
  }
  for (int fd : parent_fds) close(fd);
  for (pid_t pid : children) waitpid(pid, nullptr, 0);
  if (status != 0) std::fprintf(stderr, "a child stopped answering\n");
  return status;
}
