#include "daemon/hostctx/testing/spin_workload.h"

#include <time.h>

namespace gpuctl::hostctx::testing {
int64_t MonotonicNowNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}
}  // namespace gpuctl::hostctx::testing

extern "C" {

__attribute__((noinline)) uint64_t GpuctlHostctxSpinLeaf(uint64_t rounds) {
  volatile uint64_t acc = 1;
  for (uint64_t i = 0; i < rounds; ++i) acc = acc * 6364136223846793005ULL + i;
  return acc;
}

__attribute__((noinline)) void GpuctlHostctxSpinUntil(int64_t until_ns) {
  while (gpuctl::hostctx::testing::MonotonicNowNs() < until_ns) GpuctlHostctxSpinLeaf(200000);
}

__attribute__((noinline)) void GpuctlHostctxNapUntil(int64_t until_ns, int step_ms) {
  const timespec nap{0, static_cast<long>(step_ms) * 1000000};  // NOLINT(google-runtime-int)
  while (gpuctl::hostctx::testing::MonotonicNowNs() < until_ns) nanosleep(&nap, nullptr);
}
}
