#include "daemon/common/deadline_wait.h"

#include <utility>

namespace gpuctl {

DeadlineWaiter::DeadlineWaiter(Clock* clock, TaskRunner* timers, absl::Mutex* mu, absl::CondVar* cv)
    : clock_(clock), timers_(timers), mu_(mu), cv_(cv), target_(std::make_shared<Target>()) {
  target_->owner_mu = mu;
  target_->owner_cv = cv;
}

DeadlineWaiter::~DeadlineWaiter() {
  MutexLock lock(&target_->mu);
  target_->alive = false;
}

void DeadlineWaiter::Wait(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) {
    cv_->Wait(mu_);
    return;
  }
  if (timers_ == nullptr) {
    cv_->WaitWithTimeout(mu_, deadline - clock_->Now());
    return;
  }
  if (clock_->Now() >= deadline) return;
  Arm(deadline);
  cv_->Wait(mu_);
}

void DeadlineWaiter::Arm(absl::Time deadline) {
  if (target_->armed <= deadline) return;  // an earlier timer wakes us first
  target_->armed = deadline;
  std::weak_ptr<Target> weak = target_;
  timers_->Post([weak, deadline, clock = clock_, timers = timers_] {
    timers->PostDelayed(deadline - clock->Now(), [weak, deadline] {
      std::shared_ptr<Target> target = weak.lock();
      if (target == nullptr) return;
      MutexLock lock(&target->mu);
      if (!target->alive) return;
      absl::MutexLock owner(target->owner_mu);
      if (target->armed == deadline) target->armed = absl::InfiniteFuture();
      target->owner_cv->SignalAll();
    });
  });
}

}  // namespace gpuctl
