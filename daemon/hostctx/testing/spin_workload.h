#ifndef GPUCTL_DAEMON_HOSTCTX_TESTING_SPIN_WORKLOAD_H_
#define GPUCTL_DAEMON_HOSTCTX_TESTING_SPIN_WORKLOAD_H_

#include <cstdint>

// Work with known names for the sampler's tests, built with frame pointers.
extern "C" {
// Burns CPU: `rounds` steps of a loop the compiler cannot remove.
uint64_t GpuctlHostctxSpinLeaf(uint64_t rounds);
// Calls GpuctlHostctxSpinLeaf until CLOCK_MONOTONIC passes `until_ns`.
void GpuctlHostctxSpinUntil(int64_t until_ns);
// Sleeps in `step_ms` naps until CLOCK_MONOTONIC passes `until_ns`.
void GpuctlHostctxNapUntil(int64_t until_ns, int step_ms);
}

namespace gpuctl::hostctx::testing {
int64_t MonotonicNowNs();
}  // namespace gpuctl::hostctx::testing

#endif  // GPUCTL_DAEMON_HOSTCTX_TESTING_SPIN_WORKLOAD_H_
