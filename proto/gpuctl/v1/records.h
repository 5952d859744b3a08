// Binary record format ("GPCR") of a capture payload, produced by
// libgpuctl.so and consumed (after validation) by gpuctld.
//
// The producer is untrusted: the daemon reads every field with explicit
// little-endian loads and checks every size, count, offset and index before
// use. Nothing here is ever reinterpret_cast from received bytes.
//
// Layout (all integers little-endian):
//
//   Header, kHeaderSize bytes:
//     0  u32 magic            kMagic ("GPCR")
//     4  u16 version_major    kVersionMajor; a different major is refused
//     6  u16 version_minor    newer minors only add record kinds / fields
//     8  u32 header_size      >= kHeaderSize; readers skip extra bytes
//    12  u32 flags            reserved, 0
//    16  u64 event_count      number of records in the event section
//    24  u64 events_offset    from the start of the payload
//    32  u64 events_size      bytes
//    40  u64 strings_offset
//    48  u64 strings_size
//    56  u64 string_count
//    64  u64 dropped_events   records lost to the buffer cap
//    72  i64 window_start_ns  CLOCK_REALTIME ns
//    80  i64 window_end_ns
//    88  i32 pid
//    92  u32 reserved
//
//   Event section: event_count records, each
//     u16 kind, u16 size (whole record including these 4 bytes, multiple of
//     4, >= 4), then kind-specific fields. Readers skip kinds they do not
//     know, and ignore trailing bytes of a known kind (newer minor versions
//     may append fields).
//
//   String section: string_count strings, each u32 length then the bytes
//   (no terminator), padded to a multiple of 4. Strings are referenced by
//   their 0-based index.
#ifndef GPUCTL_PROTO_GPUCTL_V1_RECORDS_H_
#define GPUCTL_PROTO_GPUCTL_V1_RECORDS_H_

#include <cstdint>

namespace gpuctl::records {

inline constexpr uint32_t kMagic = 0x52435047;  // "GPCR"
inline constexpr uint16_t kVersionMajor = 1;
inline constexpr uint16_t kVersionMinor = 0;
inline constexpr uint32_t kHeaderSize = 96;
inline constexpr uint32_t kRecordPrefixSize = 4;
inline constexpr uint32_t kMaxStringLength = 4096;

enum class Kind : uint16_t {
  // A host range from gpuctl_range_push/pop.
  //   4 u32 tid   8 i64 start_ns   16 i64 end_ns   24 u32 name (string idx)
  //  28 u32 depth   32 u64 range_id            -> size 40
  kRange = 1,
  // A step mark from gpuctl_step / gpuctl_step_n.
  //   4 u32 tid   8 i64 ts_ns   16 u64 step       -> size 24
  kStep = 2,
  // A thread name (so the trace shows names, not only tids).
  //   4 u32 tid   8 u32 name (string idx)   12 u32 reserved -> size 16
  kThreadName = 3,
};

inline constexpr uint16_t kRangeSize = 40;
inline constexpr uint16_t kStepSize = 24;
inline constexpr uint16_t kThreadNameSize = 16;

}  // namespace gpuctl::records

#endif  // GPUCTL_PROTO_GPUCTL_V1_RECORDS_H_
