#include "cli/cancel_group.h"

namespace gpuctl::cli {

CancelGroup::CancelGroup(InterruptSource* source, std::function<void()> on_cancel)
    : on_cancel_(std::move(on_cancel)) {
  if (source != nullptr) {
    handler_ = std::make_unique<ScopedInterruptHandler>(source, [this] { Cancel(); });
  }
}

// Disarms the handler first: it returns only after a running Cancel has.
CancelGroup::~CancelGroup() { handler_.reset(); }

void CancelGroup::Cancel() {
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_.exchange(true)) return;
    for (grpc::ClientContext* context : contexts_) context->TryCancel();
  }
  if (on_cancel_) on_cancel_();
}

void CancelGroup::Add(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  contexts_.insert(context);
  if (cancelled_.load()) context->TryCancel();
}

void CancelGroup::Remove(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  contexts_.erase(context);
}

CancelGroup::Scope::Scope(CancelGroup* group, grpc::ClientContext* context)
    : group_(group), context_(context) {
  if (group_ != nullptr) group_->Add(context_);
}

CancelGroup::Scope::~Scope() {
  if (group_ != nullptr) group_->Remove(context_);
}

}  // namespace gpuctl::cli
