#include "daemon/hostctx/testing/no_frame_pointer_workload.h"

#include <time.h>

namespace {
int64_t NowNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}
}  // namespace

extern "C" {

// Each level keeps a value live across its call and uses the stack, so
// the frames are real frames whose caller only CFI can find (rbp is an
// ordinary register here).
__attribute__((noinline)) uint64_t GpuctlHostctxNoFpInner(int64_t until_ns) {
  volatile uint64_t acc = 1;
  while (NowNs() < until_ns) {
    for (uint64_t i = 0; i < 200000; ++i) acc = acc * 6364136223846793005ULL + i;
  }
  return acc;
}

__attribute__((noinline)) void GpuctlHostctxNoFpMiddle(int64_t until_ns) {
  volatile uint64_t keep[4] = {1, 2, 3, 4};
  keep[0] = keep[0] + GpuctlHostctxNoFpInner(until_ns);
  keep[1] = keep[1] + keep[0];
}

__attribute__((noinline)) void GpuctlHostctxNoFpOuter(int64_t until_ns) {
  volatile uint64_t keep[4] = {5, 6, 7, 8};
  GpuctlHostctxNoFpMiddle(until_ns);
  keep[2] = keep[2] + keep[3];
}
}
