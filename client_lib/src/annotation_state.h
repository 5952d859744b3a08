// The words the annotation API reads on every call. Outside a capture
// window gpuctl_range_push/pop cost one relaxed load of `gate` and record
// nothing; any non-zero gate sends the caller to the slow path.
// gpuctl_step/gpuctl_step_n always mark the step on the counters (a few
// relaxed atomic operations and a vDSO clock read, never a lock or a
// system call) and take the slow path only when the gate is non-zero.
#ifndef GPUCTL_CLIENT_LIB_SRC_ANNOTATION_STATE_H_
#define GPUCTL_CLIENT_LIB_SRC_ANNOTATION_STATE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "gpuctl/v1/step_page.h"

namespace gpuctl::client {

// A host capture window is open: annotations are recorded.
inline constexpr uint32_t kGateCapturing = 1;
// This process is a fork child whose parent ran an agent: the next API call
// starts the child's own agent.
inline constexpr uint32_t kGateRestartAfterFork = 2;
// An iteration window is watching for its start or end step: every step
// mark goes to the capture session.
inline constexpr uint32_t kGateStepWatch = 4;

// The fields of the shared step page (proto/gpuctl/v1/step_page.h), laid
// out as that header says so the struct can live at the start of the page.
struct StepCounters {
  std::atomic<uint32_t> magic{0};
  std::atomic<uint32_t> version{0};
  std::atomic<uint64_t> next_step{0};
  std::atomic<int64_t> last_step_unix_ns{0};
  std::atomic<int64_t> period_ns{0};
  std::atomic<uint64_t> durations_written{0};
  std::atomic<int64_t> durations[steps::kStepRingSize]{};
};
static_assert(offsetof(StepCounters, magic) == steps::kOffsetMagic);
static_assert(offsetof(StepCounters, version) == steps::kOffsetVersion);
static_assert(offsetof(StepCounters, next_step) == steps::kOffsetNextStep);
static_assert(offsetof(StepCounters, last_step_unix_ns) == steps::kOffsetLastStepNs);
static_assert(offsetof(StepCounters, period_ns) == steps::kOffsetPeriodNs);
static_assert(offsetof(StepCounters, durations_written) == steps::kOffsetDurationsWritten);
static_assert(offsetof(StepCounters, durations) == steps::kOffsetDurations);
static_assert(sizeof(StepCounters) <= steps::kStepPageBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
              std::atomic<int64_t>::is_always_lock_free);

struct AnnotationState {
  alignas(64) std::atomic<uint32_t> gate{0};
  // Where steps are counted: the shared step page once the runtime made
  // one (StepCounterPage), else `private_counters`. Counting goes on
  // outside windows too, so step numbers in a trace are the process's real
  // step numbers. Replaced only by StepCounterPage.
  alignas(64) std::atomic<StepCounters*> counters{&private_counters};
  StepCounters private_counters;
};

// The newest of a mark's time, the moving mean of the time between marks
// (1/8 weight to the newest interval) and the ring of recent intervals.
inline void UpdateStepTime(StepCounters& c, int64_t now_ns) {
  const int64_t last = c.last_step_unix_ns.load(std::memory_order_relaxed);
  c.last_step_unix_ns.store(now_ns, std::memory_order_relaxed);
  if (last <= 0 || now_ns <= last) return;
  const int64_t interval = now_ns - last;
  const int64_t period = c.period_ns.load(std::memory_order_relaxed);
  c.period_ns.store(period <= 0 ? interval : period + (interval - period) / 8,
                    std::memory_order_relaxed);
  const uint64_t written = c.durations_written.load(std::memory_order_relaxed);
  c.durations[written % steps::kStepRingSize].store(interval, std::memory_order_relaxed);
  c.durations_written.store(written + 1, std::memory_order_release);
}

// gpuctl_step(): marks the next step at `now_ns` and returns its number.
inline uint64_t MarkStep(AnnotationState& state, int64_t now_ns) {
  StepCounters* c = state.counters.load(std::memory_order_acquire);
  const uint64_t step = c->next_step.fetch_add(1, std::memory_order_relaxed);
  UpdateStepTime(*c, now_ns);
  return step;
}

// gpuctl_step_n(step): marks `step` at `now_ns`; the counter goes on from it.
inline void MarkStepN(AnnotationState& state, uint64_t step, int64_t now_ns) {
  StepCounters* c = state.counters.load(std::memory_order_acquire);
  c->next_step.store(step + 1, std::memory_order_relaxed);
  UpdateStepTime(*c, now_ns);
}

// The number of the last marked step; false when none was marked.
inline bool LastMarkedStep(const AnnotationState& state, uint64_t* step) {
  const uint64_t next =
      state.counters.load(std::memory_order_acquire)->next_step.load(std::memory_order_relaxed);
  if (next == 0) return false;
  *step = next - 1;
  return true;
}

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_ANNOTATION_STATE_H_
