// The step counter a library shares with gpuctld: one page in a memfd,
// written by the application's threads (gpuctl_step / gpuctl_step_n) and
// read by the daemon through a read-only shared mapping, so the daemon
// knows every process's current step without any message.
//
// The library creates the memfd, sizes it to kStepPageBytes, seals it with
// F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL and passes it with Hello
// (Hello.step_counter). The daemon checks the size and the seals before it
// maps the page (a peer that could shrink it could make the daemon fault),
// and treats every value as untrusted.
//
// Layout (host byte order: both ends run on the same host):
//    0  u32 magic              kStepPageMagic ("GPST")
//    4  u32 version            kStepPageVersion
//    8  u64 next_step          the step counter: the number the next
//                              gpuctl_step() marks; 0 when no step was
//                              marked. The last marked step is next_step-1.
//   16  i64 last_step_unix_ns  CLOCK_REALTIME of the last mark
//   24  i64 period_ns          moving mean of the time between marks
//                              (1/8 weight to the newest), 0 if unknown
// Each field is written and read with relaxed 8-byte atomic operations;
// the fields are not updated together, so a reader may see a mix of two
// consecutive marks.
#ifndef GPUCTL_PROTO_GPUCTL_V1_STEP_PAGE_H_
#define GPUCTL_PROTO_GPUCTL_V1_STEP_PAGE_H_

#include <cstdint>

namespace gpuctl::steps {

inline constexpr uint32_t kStepPageMagic = 0x54535047;  // "GPST"
inline constexpr uint32_t kStepPageVersion = 1;
inline constexpr uint64_t kStepPageBytes = 4096;

inline constexpr uint32_t kOffsetMagic = 0;
inline constexpr uint32_t kOffsetVersion = 4;
inline constexpr uint32_t kOffsetNextStep = 8;
inline constexpr uint32_t kOffsetLastStepNs = 16;
inline constexpr uint32_t kOffsetPeriodNs = 24;

}  // namespace gpuctl::steps

#endif  // GPUCTL_PROTO_GPUCTL_V1_STEP_PAGE_H_
