#include "daemon/core/ingest_admission.h"

#include <utility>
#include <vector>

namespace gpuctl::daemon {

bool IngestAdmission::Fits(uint64_t bytes) const {
  if (max_bytes_ == 0 || running_.empty()) return true;
  return bytes <= max_bytes_ && running_bytes_ + bytes <= max_bytes_;
}

IngestAdmission::Id IngestAdmission::Submit(uint64_t bytes, StartFn start) {
  const Id id = next_id_++;
  waiting_.push_back(Waiter{id, bytes, std::move(start)});
  waiting_bytes_ += bytes;
  StartWaiters();
  return id;
}

void IngestAdmission::Release(Id id) {
  auto it = running_.find(id);
  if (it == running_.end()) return;
  running_bytes_ -= it->second;
  running_.erase(it);
  StartWaiters();
}

bool IngestAdmission::Cancel(Id id) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (it->id != id) continue;
    waiting_bytes_ -= it->bytes;
    const bool was_head = it == waiting_.begin();
    waiting_.erase(it);
    // The new head may fit where the removed one did not.
    if (was_head) StartWaiters();
    return true;
  }
  return false;
}

void IngestAdmission::StartWaiters() {
  // State first, callbacks after: a callback may re-enter.
  std::vector<Waiter> admitted;
  while (!waiting_.empty() && Fits(waiting_.front().bytes)) {
    Waiter w = std::move(waiting_.front());
    waiting_.pop_front();
    waiting_bytes_ -= w.bytes;
    running_.emplace(w.id, w.bytes);
    running_bytes_ += w.bytes;
    admitted.push_back(std::move(w));
  }
  for (Waiter& w : admitted) w.start(w.id);
}

}  // namespace gpuctl::daemon
