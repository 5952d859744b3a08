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
//   Minor 1 adds the GPU kinds (kKernel .. kCaptureInfo).
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
inline constexpr uint16_t kVersionMinor = 1;
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

  // ---- GPU activity (minor 1), recorded through CUPTI. Timestamps are
  // CLOCK_REALTIME ns, the same clock as the host records (CUPTI's
  // timestamp callback is the library's clock). Ids (device, context,
  // stream, correlation) are CUPTI's. Records entirely outside the window
  // are not written; a record that overlaps a window edge is kept whole.
  // u8/u16 fields are packed as shown, little-endian.

  // A kernel execution (CUpti_ActivityKernel10).
  //   4 u32 device_id    8 u32 context_id   12 u32 stream_id
  //  16 u32 correlation_id (links to the launching kApiCall)
  //  20 u32 name (string idx, the mangled or demangled name CUPTI gives)
  //  24 i64 start_ns    32 i64 end_ns
  //  40 i32 grid_x  44 i32 grid_y  48 i32 grid_z
  //  52 i32 block_x 56 i32 block_y 60 i32 block_z
  //  64 u32 registers_per_thread
  //  68 u32 static_shared_memory (bytes per block)
  //  72 u32 dynamic_shared_memory (bytes per block)
  //  76 u32 graph_id (0: not launched from a CUDA graph)
  //  80 u64 graph_node_id (0: not from a graph)
  //  88 u32 shared_memory_executed (bytes of shared memory configured per SM)
  //  92 u32 local_memory_per_thread (bytes)
  //  96 u64 queued_ns (0: unknown)   104 u32 cache_config_executed
  // 108 u32 launch_type (CUpti_ActivityLaunchType)  -> size 112
  kKernel = 10,
  // A memory copy (CUpti_ActivityMemcpy6, or CUpti_ActivityMemcpyPtoP4 for
  // a peer copy: flags bit kMemcpyFlagPeer).
  //   4 u32 device_id    8 u32 context_id   12 u32 stream_id
  //  16 u32 correlation_id
  //  20 u8 copy_kind (CUpti_ActivityMemcpyKind: 1 HtoD, 2 DtoH, 8 DtoD,
  //        10 PtoP, ...)
  //  21 u8 src_kind  22 u8 dst_kind (CUpti_ActivityMemoryKind)
  //  23 u8 flags (kMemcpyFlagAsync, kMemcpyFlagPeer)
  //  24 i64 start_ns    32 i64 end_ns    40 u64 bytes
  //  48 u32 src_device  52 u32 dst_device  56 u32 src_context
  //  60 u32 dst_context (peer copies; otherwise device_id / context_id)
  //  64 u32 graph_id    68 u32 reserved    72 u64 graph_node_id -> size 80
  kMemcpy = 11,
  // A memset (CUpti_ActivityMemset4).
  //   4 u32 device_id    8 u32 context_id   12 u32 stream_id
  //  16 u32 correlation_id   20 u32 value
  //  24 i64 start_ns    32 i64 end_ns    40 u64 bytes
  //  48 u16 memory_kind (CUpti_ActivityMemoryKind)
  //  50 u16 flags (kMemsetFlagAsync)
  //  52 u32 graph_id    56 u64 graph_node_id                  -> size 64
  kMemset = 12,
  // A CUDA runtime or driver API call (CUpti_ActivityAPI).
  //   4 u32 domain (kApiDomainRuntime / kApiDomainDriver)
  //   8 u32 cbid (CUPTI callback id of the function)
  //  12 u32 correlation_id   16 u32 pid   20 u32 tid
  //  24 i64 start_ns    32 i64 end_ns
  //  40 u32 name (string idx, e.g. "cudaLaunchKernel")
  //  44 u32 return_value                                       -> size 48
  kApiCall = 13,
  // A synchronization (CUpti_ActivitySynchronization2).
  //   4 u32 type (CUpti_ActivitySynchronizationType: 1 event synchronize,
  //        2 stream wait event, 3 stream synchronize, 4 context synchronize)
  //   8 u32 context_id  12 u32 stream_id  16 u32 cuda_event_id
  //        (kInvalidId when not applicable)
  //  20 u32 correlation_id   24 i64 start_ns   32 i64 end_ns
  //  40 u32 return_value     44 u32 reserved                    -> size 48
  kSync = 14,
  // An NVTX range or instant (CUpti_ActivityMarker2 START/END pairs joined
  // by marker id; an instant has start_ns == end_ns and kMarkerFlagInstant).
  // A range still open at window end ends there.
  //   4 u32 pid   8 u32 tid   12 u32 marker_id
  //  16 i64 start_ns    24 i64 end_ns
  //  32 u32 name (string idx)   36 u32 domain (string idx; "" = default)
  //  40 u32 flags (kMarkerFlagInstant)   44 u32 reserved         -> size 48
  kMarker = 15,
  // CUPTI or driver overhead (CUpti_ActivityOverhead3).
  //   4 u32 overhead_kind (CUpti_ActivityOverheadKind)
  //   8 u32 object_kind (CUpti_ActivityObjectKind: 1 process, 2 thread,
  //        3 device, 4 context, 5 stream)
  //  12 u32 object_id0 (process id, or device id)
  //  16 u32 object_id1 (thread id, or context id)
  //  20 u32 object_id2 (stream id; 0 for process/thread objects)
  //  24 i64 start_ns    32 i64 end_ns
  //  40 u32 correlation_id   44 u32 reserved                    -> size 48
  kOverhead = 16,
  // Links a CUPTI correlation id to an external id
  // (CUpti_ActivityExternalCorrelation). With external_kind
  // kExternalKindGpuctlRange, external_id is the range_id of the kRange
  // that was open on the launching thread.
  //   4 u32 external_kind (CUpti_ExternalCorrelationKind)
  //   8 u32 correlation_id   12 u32 reserved   16 u64 external_id -> size 24
  kExternalCorrelation = 17,
  // Properties of one device, for kineto's deviceProperties and occupancy.
  // At most one per device_id per payload.
  //   4 u32 device_id    8 u32 name (string idx)
  //  12 u32 compute_major   16 u32 compute_minor   20 u32 sm_count
  //  24 u32 max_threads_per_sm   28 u32 max_threads_per_block
  //  32 u32 max_registers_per_sm 36 u32 max_registers_per_block
  //  40 u32 max_shared_memory_per_sm  44 u32 max_shared_memory_per_block
  //  48 u32 max_blocks_per_sm   52 u32 warp_size
  //  56 u64 global_memory_bytes
  //  64 u64 global_memory_bandwidth (KiB/s; 0 unknown)
  //  72 u32 l2_cache_bytes   76 u32 core_clock_khz (0 unknown)  -> size 80
  kDeviceInfo = 18,
  // How the GPU part of the capture went. Exactly one per payload from a
  // library that supports CUPTI (absent when no GPU activity was asked).
  //   4 u32 flags (kCaptureFlag*)
  //   8 u32 activities (kActivity* bits that were enabled)
  //  12 u32 cupti_version (cuptiGetVersion; 0 when not loaded)
  //  16 u64 dropped_by_cupti (cuptiActivityGetNumDroppedRecords)
  //  24 u64 dropped_at_cap (records lost to the buffer cap)
  //  32 u32 message (string idx: why host-only, or what failed; "" if none)
  //  36 u32 cupti_path (string idx: the library loaded; "" if none)
  //                                                             -> size 40
  kCaptureInfo = 19,
};

inline constexpr uint16_t kKernelSize = 112;
inline constexpr uint16_t kMemcpySize = 80;
inline constexpr uint16_t kMemsetSize = 64;
inline constexpr uint16_t kApiCallSize = 48;
inline constexpr uint16_t kSyncSize = 48;
inline constexpr uint16_t kMarkerSize = 48;
inline constexpr uint16_t kOverheadSize = 48;
inline constexpr uint16_t kExternalCorrelationSize = 24;
inline constexpr uint16_t kDeviceInfoSize = 80;
inline constexpr uint16_t kCaptureInfoSize = 40;

// kMemcpy flags.
inline constexpr uint8_t kMemcpyFlagAsync = 1;
inline constexpr uint8_t kMemcpyFlagPeer = 2;
// kMemset flags.
inline constexpr uint16_t kMemsetFlagAsync = 1;
// kApiCall domains.
inline constexpr uint32_t kApiDomainRuntime = 1;
inline constexpr uint32_t kApiDomainDriver = 2;
// kMarker flags.
inline constexpr uint32_t kMarkerFlagInstant = 1;
// kExternalCorrelation: the kind gpuctl ranges use (CUPTI's CUSTOM0).
inline constexpr uint32_t kExternalKindGpuctlRange = 3;
// "Not applicable" for CUPTI ids (CUPTI_SYNCHRONIZATION_INVALID_VALUE).
inline constexpr uint32_t kInvalidId = 0xffffffffu;

// kCaptureInfo flags.
// GPU activity was asked for but none could be recorded; the payload holds
// host records only. The message says why (no CUDA in the process, no
// device).
inline constexpr uint32_t kCaptureFlagHostOnly = 1;
// CUPTI was loaded and subscribed for this window.
inline constexpr uint32_t kCaptureFlagCuptiActive = 2;
// CUPTI failed during the window (a flush error); records collected before
// the failure are in the payload, the message says what failed.
inline constexpr uint32_t kCaptureFlagCuptiFailed = 4;

// Activity bits: kCaptureInfo.activities, and the names StartCapture
// .activities carries (ipc.proto).
inline constexpr uint32_t kActivityKernel = 1;      // "kernel"
inline constexpr uint32_t kActivityMemcpy = 2;      // "memcpy"
inline constexpr uint32_t kActivityMemset = 4;      // "memset"
inline constexpr uint32_t kActivityRuntime = 8;     // "runtime"
inline constexpr uint32_t kActivityDriver = 16;     // "driver"
inline constexpr uint32_t kActivitySync = 32;       // "sync"
inline constexpr uint32_t kActivityNvtx = 64;       // "nvtx"
inline constexpr uint32_t kActivityOverhead = 128;  // "overhead"
// Used when StartCapture.activities is empty.
inline constexpr uint32_t kDefaultActivities = kActivityKernel | kActivityMemcpy | kActivityMemset |
                                               kActivityRuntime | kActivitySync | kActivityNvtx |
                                               kActivityOverhead;

inline constexpr uint16_t kRangeSize = 40;
inline constexpr uint16_t kStepSize = 24;
inline constexpr uint16_t kThreadNameSize = 16;

}  // namespace gpuctl::records

#endif  // GPUCTL_PROTO_GPUCTL_V1_RECORDS_H_
