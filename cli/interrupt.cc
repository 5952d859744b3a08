#include "cli/interrupt.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpuctl::cli {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM};
// Written by the destructor to stop the watcher; signal numbers are never 0.
constexpr unsigned char kStopByte = 0;

std::atomic<int> g_signal_write_fd{-1};
struct sigaction g_previous[std::size(kSignals)];
std::atomic<bool> g_installed{false};

extern "C" void OnInterruptSignal(int signo) {
  int saved_errno = errno;
  int fd = g_signal_write_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    unsigned char byte = static_cast<unsigned char>(signo);
    // A full pipe already holds a pending wake-up; dropping this one is fine.
    [[maybe_unused]] ssize_t n = write(fd, &byte, 1);
  }
  errno = saved_errno;
}

}  // namespace

ScopedInterruptHandler::ScopedInterruptHandler(InterruptSource* source,
                                               std::function<void()> handler)
    : source_(source) {
  if (source_ != nullptr) source_->SetHandler(std::move(handler));
}

ScopedInterruptHandler::~ScopedInterruptHandler() {
  if (source_ != nullptr) source_->SetHandler(nullptr);
}

absl::StatusOr<std::unique_ptr<SignalInterruptSource>> SignalInterruptSource::Create() {
  if (g_installed.exchange(true)) {
    return absl::FailedPreconditionError("a SignalInterruptSource already exists");
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    g_installed = false;
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  auto source = std::unique_ptr<SignalInterruptSource>(new SignalInterruptSource(fds[0], fds[1]));
  g_signal_write_fd = fds[1];
  struct sigaction action = {};
  action.sa_handler = OnInterruptSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &action, &g_previous[i]);
  return source;
}

SignalInterruptSource::SignalInterruptSource(int read_fd, int write_fd)
    : read_fd_(read_fd), write_fd_(write_fd), watcher_([this] { WatchLoop(); }) {}

SignalInterruptSource::~SignalInterruptSource() {
  RestoreDispositions();
  g_signal_write_fd = -1;
  const unsigned char stop = kStopByte;
  for (;;) {
    if (write(write_fd_, &stop, 1) == 1) break;
    if (errno == EINTR) continue;
    if (errno != EAGAIN) break;
    // The pipe is full of unread signal bytes; the watcher is draining it.
    pollfd pfd{write_fd_, POLLOUT, 0};
    poll(&pfd, 1, -1);
  }
  watcher_.join();
  close(read_fd_);
  close(write_fd_);
  g_installed = false;
}

void SignalInterruptSource::RestoreDispositions() {
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
}

void SignalInterruptSource::SetHandler(std::function<void()> handler) {
  absl::MutexLock lock(&mu_);
  handler_ = std::move(handler);
}

void SignalInterruptSource::WatchLoop() {
  for (;;) {
    pollfd pfd{read_fd_, POLLIN, 0};
    if (poll(&pfd, 1, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    unsigned char byte;
    ssize_t n = read(read_fd_, &byte, 1);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0 || byte == kStopByte) return;
    RestoreDispositions();
    absl::MutexLock lock(&mu_);
    if (handler_) handler_();
  }
}

}  // namespace gpuctl::cli
