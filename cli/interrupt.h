#ifndef GPUCTL_CLI_INTERRUPT_H_
#define GPUCTL_CLI_INTERRUPT_H_

#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace gpuctl::cli {

// Tells a running command that the user wants it to stop.
class InterruptSource {
 public:
  virtual ~InterruptSource() = default;
  // Installs `handler` (replacing any previous one; empty disarms). It runs
  // on a thread owned by the source, at most once per interrupt. Returns
  // only after a handler already running has returned, so the caller may
  // destroy what the old handler touches.
  virtual void SetHandler(std::function<void()> handler) = 0;
};

// Arms a handler for one scope.
class ScopedInterruptHandler {
 public:
  ScopedInterruptHandler(InterruptSource* source, std::function<void()> handler);
  ~ScopedInterruptHandler();
  ScopedInterruptHandler(const ScopedInterruptHandler&) = delete;
  ScopedInterruptHandler& operator=(const ScopedInterruptHandler&) = delete;

 private:
  InterruptSource* source_;
};

// SIGINT and SIGTERM. The signal handler only writes a byte to a pipe
// (async-signal-safe); a watcher thread reads it and runs the handler, so the
// handler may take locks and call gRPC. After the first interrupt the
// previous dispositions are restored, so a second Ctrl-C ends a stuck
// process the usual way. At most one instance may exist at a time.
class SignalInterruptSource final : public InterruptSource {
 public:
  static absl::StatusOr<std::unique_ptr<SignalInterruptSource>> Create();
  ~SignalInterruptSource() override;

  void SetHandler(std::function<void()> handler) override;

 private:
  SignalInterruptSource(int read_fd, int write_fd);
  void WatchLoop();
  void RestoreDispositions();

  const int read_fd_;
  const int write_fd_;
  absl::Mutex mu_;
  std::function<void()> handler_ ABSL_GUARDED_BY(mu_);
  std::thread watcher_;
};

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_INTERRUPT_H_
