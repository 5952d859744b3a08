#ifndef GPUCTL_CLI_CANCEL_GROUP_H_
#define GPUCTL_CLI_CANCEL_GROUP_H_

#include <atomic>
#include <functional>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "cli/interrupt.h"
#include "grpcpp/client_context.h"

namespace gpuctl::cli {

// Cancels every call of a command at once: on the user's interrupt (when a
// source is given) or on Cancel(). Calls register their ClientContext for
// their lifetime; a context registered after the cancellation is cancelled
// at once. Thread-safe.
//
// TryCancel runs with the group's lock held, so that a context cannot be
// destroyed under it: the reactions of a registered callback-API call must
// not call into the group.
class CancelGroup {
 public:
  // Arms an interrupt handler on `source` (may be null) for the group's
  // lifetime; `on_cancel` (optional) runs once after the contexts were
  // cancelled, outside the group's lock.
  explicit CancelGroup(InterruptSource* source, std::function<void()> on_cancel = nullptr);
  ~CancelGroup();
  CancelGroup(const CancelGroup&) = delete;
  CancelGroup& operator=(const CancelGroup&) = delete;

  void Cancel();
  bool cancelled() const { return cancelled_.load(); }
  // For waits that poll (Connect).
  const std::atomic<bool>* flag() const { return &cancelled_; }

  void Add(grpc::ClientContext* context);
  void Remove(grpc::ClientContext* context);

  // Registers a context for one scope.
  class Scope {
   public:
    Scope(CancelGroup* group, grpc::ClientContext* context);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CancelGroup* group_;
    grpc::ClientContext* context_;
  };

 private:
  std::atomic<bool> cancelled_{false};
  std::function<void()> on_cancel_;
  absl::Mutex mu_;
  std::set<grpc::ClientContext*> contexts_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ScopedInterruptHandler> handler_;
};

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_CANCEL_GROUP_H_
