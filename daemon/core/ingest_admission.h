#ifndef GPUCTL_DAEMON_CORE_INGEST_ADMISSION_H_
#define GPUCTL_DAEMON_CORE_INGEST_ADMISSION_H_

#include <cstdint>
#include <deque>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"

namespace gpuctl::daemon {

// Bounds the trace data being validated and converted at once
// (trace.max_ingest_bytes), so that many processes delivering together
// wait their turn instead of growing the daemon's memory.
//
// Entries start in submission order (FIFO, no overtaking): the head starts
// when its bytes fit under the cap next to those already running, or when
// nothing runs (an entry larger than the cap then runs alone). A cap of 0
// admits everything at once.
//
// Threading: every method runs on one thread (the core's event loop). A
// start callback runs inside Submit, Release or Cancel, after the
// admission's state is updated, so it may call back into it.
class IngestAdmission {
 public:
  using Id = uint64_t;
  using StartFn = absl::AnyInvocable<void(Id)>;

  explicit IngestAdmission(uint64_t max_bytes) : max_bytes_(max_bytes) {}
  IngestAdmission(const IngestAdmission&) = delete;
  IngestAdmission& operator=(const IngestAdmission&) = delete;

  // Queues `bytes` of work; `start` runs (with the entry's id) once it is
  // admitted, possibly before Submit returns. Every started entry must be
  // Released.
  Id Submit(uint64_t bytes, StartFn start);
  // The entry `id` finished: its bytes are freed and waiters start.
  // Unknown ids are ignored.
  void Release(Id id);
  // Removes `id` if it is still waiting (its start never runs) and returns
  // true; a running or unknown entry is left alone (false): its bytes are in
  // use until it is Released.
  bool Cancel(Id id);

  // The cap (0: none).
  uint64_t max_bytes() const { return max_bytes_; }
  // The entry `id` has started and is not Released yet.
  bool IsRunning(Id id) const { return running_.contains(id); }
  uint64_t running_bytes() const { return running_bytes_; }
  size_t running_count() const { return running_.size(); }
  size_t waiting_count() const { return waiting_.size(); }
  // Bytes queued ahead of a new submission.
  uint64_t waiting_bytes() const { return waiting_bytes_; }

 private:
  struct Waiter {
    Id id;
    uint64_t bytes;
    StartFn start;
  };
  bool Fits(uint64_t bytes) const;
  void StartWaiters();

  const uint64_t max_bytes_;
  Id next_id_ = 1;
  uint64_t running_bytes_ = 0;
  uint64_t waiting_bytes_ = 0;
  absl::flat_hash_map<Id, uint64_t> running_;
  std::deque<Waiter> waiting_;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_INGEST_ADMISSION_H_
