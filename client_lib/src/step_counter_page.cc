#include "client_lib/src/step_counter_page.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <new>

namespace gpuctl::client {

namespace {

void CopyStepCounters(const StepCounters& from, StepCounters* to) {
  to->next_step.store(from.next_step.load(std::memory_order_relaxed), std::memory_order_relaxed);
  to->last_step_unix_ns.store(from.last_step_unix_ns.load(std::memory_order_relaxed),
                              std::memory_order_relaxed);
  to->period_ns.store(from.period_ns.load(std::memory_order_relaxed), std::memory_order_relaxed);
  for (uint32_t i = 0; i < steps::kStepRingSize; ++i) {
    to->durations[i].store(from.durations[i].load(std::memory_order_relaxed),
                           std::memory_order_relaxed);
  }
  to->durations_written.store(from.durations_written.load(std::memory_order_acquire),
                              std::memory_order_release);
}

}  // namespace

StepCounters* MoveStepCounters(AnnotationState* state, StepCounters* to) {
  StepCounters* from = state->counters.load(std::memory_order_acquire);
  if (from == to) return from;
  CopyStepCounters(*from, to);
  const uint64_t next = to->next_step.load(std::memory_order_relaxed);
  state->counters.store(to, std::memory_order_release);
  // Steps counted on the old counters by a thread that had loaded the
  // pointer before the switch (gpuctl_step only counts up).
  const uint64_t late = from->next_step.load(std::memory_order_relaxed);
  if (late > next) to->next_step.fetch_add(late - next, std::memory_order_relaxed);
  return from;
}

bool StepCounterPage::Create() {
  const int fd = memfd_create("gpuctl-steps", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return false;
  int rc;
  do {
    rc = ftruncate(fd, static_cast<off_t>(steps::kStepPageBytes));
  } while (rc != 0 && errno == EINTR);
  // The daemon refuses a page that could shrink under its mapping.
  if (rc != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    close(fd);
    return false;
  }
  void* mapping = mmap(nullptr, steps::kStepPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapping == MAP_FAILED) {
    close(fd);
    return false;
  }
  auto* counters = new (mapping) StepCounters;
  counters->magic.store(steps::kStepPageMagic, std::memory_order_relaxed);
  counters->version.store(steps::kStepPageVersion, std::memory_order_relaxed);
  fd_ = fd;
  mapping_ = mapping;
  return true;
}

void StepCounterPage::Release() {
  if (mapping_ != nullptr) munmap(mapping_, steps::kStepPageBytes);
  if (fd_ >= 0) close(fd_);
  mapping_ = nullptr;
  fd_ = -1;
}

void StepCounterPage::Install(AnnotationState* state) {
  if (mapping_ != nullptr || !Create()) return;
  MoveStepCounters(state, static_cast<StepCounters*>(mapping_));
}

void StepCounterPage::ReinstallInForkChild(AnnotationState* state) {
  // The inherited values are read from the parent's page (still mapped
  // here) before it is dropped; nothing is ever written to it. One thread
  // exists: no step can be marked meanwhile.
  StepCounters inherited;
  CopyStepCounters(*state->counters.load(std::memory_order_acquire), &inherited);
  state->counters.store(&state->private_counters, std::memory_order_release);
  Release();
  StepCounters* target = Create() ? static_cast<StepCounters*>(mapping_) : &state->private_counters;
  CopyStepCounters(inherited, target);
  state->counters.store(target, std::memory_order_release);
}

void StepCounterPage::Uninstall(AnnotationState* state) {
  if (mapping_ == nullptr) return;
  MoveStepCounters(state, &state->private_counters);
  Release();
}

}  // namespace gpuctl::client
