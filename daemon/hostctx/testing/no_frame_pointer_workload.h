#ifndef GPUCTL_DAEMON_HOSTCTX_TESTING_NO_FRAME_POINTER_WORKLOAD_H_
#define GPUCTL_DAEMON_HOSTCTX_TESTING_NO_FRAME_POINTER_WORKLOAD_H_

#include <cstdint>

// A call chain built without frame pointers (-fomit-frame-pointer, with
// unwind tables), as Debian's packages and PyTorch's wheels are, for the
// DWARF unwinding tests: Outer calls Middle calls Inner, which spins.
extern "C" {
// Spins in GpuctlHostctxNoFpInner until CLOCK_MONOTONIC passes `until_ns`.
void GpuctlHostctxNoFpOuter(int64_t until_ns);
void GpuctlHostctxNoFpMiddle(int64_t until_ns);
uint64_t GpuctlHostctxNoFpInner(int64_t until_ns);
}

#endif  // GPUCTL_DAEMON_HOSTCTX_TESTING_NO_FRAME_POINTER_WORKLOAD_H_
