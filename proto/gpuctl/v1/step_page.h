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
// Version 2 adds a ring of the most recent step durations, so the daemon
// sees each step's time (step-time anomalies), not only the mean:
//   32  u64 durations_written  how many durations were ever written
//   40  i64 durations[kStepRingSize]
//                              the i-th duration (0-based, the time from
//                              one mark to the next) at index
//                              i % kStepRingSize; the newest is entry
//                              durations_written - 1
// A version 1 page (older libraries) ends after period_ns; the daemon
// reads both versions. Each field is written and read with relaxed 8-byte
// atomic operations (durations_written with release and acquire, after
// the entry it counts); the fields are not updated together, so a reader
// may see a mix of two consecutive marks, and a ring entry overwritten
// while it is read.
#ifndef GPUCTL_PROTO_GPUCTL_V1_STEP_PAGE_H_
#define GPUCTL_PROTO_GPUCTL_V1_STEP_PAGE_H_

#include <cstdint>

namespace gpuctl::steps {

inline constexpr uint32_t kStepPageMagic = 0x54535047;  // "GPST"
// The version this library writes, and the oldest the daemon still reads.
inline constexpr uint32_t kStepPageVersion = 2;
inline constexpr uint32_t kStepPageVersionWithoutRing = 1;
inline constexpr uint64_t kStepPageBytes = 4096;

inline constexpr uint32_t kOffsetMagic = 0;
inline constexpr uint32_t kOffsetVersion = 4;
inline constexpr uint32_t kOffsetNextStep = 8;
inline constexpr uint32_t kOffsetLastStepNs = 16;
inline constexpr uint32_t kOffsetPeriodNs = 24;
inline constexpr uint32_t kOffsetDurationsWritten = 32;
inline constexpr uint32_t kOffsetDurations = 40;
inline constexpr uint32_t kStepRingSize = 256;
static_assert(kOffsetDurations + 8 * kStepRingSize <= kStepPageBytes);

}  // namespace gpuctl::steps

#endif  // GPUCTL_PROTO_GPUCTL_V1_STEP_PAGE_H_
