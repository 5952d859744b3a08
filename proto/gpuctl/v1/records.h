// Binary record format ("GPCR") of a capture payload, produced by
// libgpuctl.so and consumed (after validation) by gpuctld.
//
// A payload is a header, an event section and a string section; every
// integer is little-endian. The header says where the sections are. The
// event section holds event_count records, each a u16 kind and a u16 size
// (the whole record including these 4 bytes, a multiple of 4, >= 4), then
// the kind's fields. Readers skip kinds they do not know, and ignore the
// trailing bytes of a known kind (a newer minor may append fields). The
// string section holds string_count strings, each a u32 length then the
// bytes (no terminator), padded to a multiple of 4; records refer to
// strings by their 0-based index.
//
// The producer is untrusted: the daemon reads every field with explicit
// little-endian loads and checks every size, count, offset and index before
// use. Nothing here is ever reinterpret_cast from received bytes.
//
// Each layout below is defined once, as a field table: F(type, name,
// offset) for a field, PAD(offset, bytes) for reserved bytes (written 0,
// never read). From the tables come the record structs, the sizes
// (kKernelSize, ...), and the encoder and decoder of record_codec.h; a
// static_assert checks that every table tiles its record without gaps and
// with each field at its natural alignment. docs/protocol.md ("Adding a
// field to a record") says how to add a field.
#ifndef GPUCTL_PROTO_GPUCTL_V1_RECORDS_H_
#define GPUCTL_PROTO_GPUCTL_V1_RECORDS_H_

#include <array>
#include <cstddef>
#include <cstdint>

namespace gpuctl::records {

inline constexpr uint32_t kMagic = 0x52435047;  // "GPCR"
inline constexpr uint16_t kVersionMajor = 1;
// Minor 1 adds the GPU kinds (kKernel .. kCaptureInfo); minor 2 the device
// memory kinds (kMemory, kMemoryPool).
inline constexpr uint16_t kVersionMinor = 2;
inline constexpr uint32_t kHeaderSize = 96;
inline constexpr uint32_t kRecordPrefixSize = 4;
inline constexpr uint32_t kMaxStringLength = 4096;

// Fixed-size arrays in records (a type in a table is one macro argument).
using I32x3 = std::array<int32_t, 3>;
using U32x3 = std::array<uint32_t, 3>;
// A field that holds an index into the string section.
using StringIndex = uint32_t;

// The payload header. Offsets from the start of the payload.
#define GPUCTL_RECORD_HEADER_FIELDS(F, PAD)                                        \
  F(uint32_t, magic, 0)          /* kMagic */                                      \
  F(uint16_t, version_major, 4)  /* kVersionMajor; a different major is refused */ \
  F(uint16_t, version_minor, 6)  /* newer minors only add record kinds/fields */   \
  F(uint32_t, header_size, 8)    /* >= kHeaderSize; readers skip extra bytes */    \
  F(uint32_t, flags, 12)         /* reserved, 0 */                                 \
  F(uint64_t, event_count, 16)   /* records in the event section */                \
  F(uint64_t, events_offset, 24) /* from the start of the payload */               \
  F(uint64_t, events_size, 32)   /* bytes */                                       \
  F(uint64_t, strings_offset, 40)                                                  \
  F(uint64_t, strings_size, 48)                                                    \
  F(uint64_t, string_count, 56)                                                    \
  F(uint64_t, dropped_events, 64) /* records lost to the buffer cap */             \
  F(int64_t, window_start_ns, 72) /* CLOCK_REALTIME ns */                          \
  F(int64_t, window_end_ns, 80)                                                    \
  F(int32_t, pid, 88)                                                              \
  PAD(92, 4)

enum class Kind : uint16_t {
  // A host range from gpuctl_range_push/pop.
  kRange = 1,
  // A step mark from gpuctl_step / gpuctl_step_n.
  kStep = 2,
  // A thread name (so the trace shows names, not only tids).
  kThreadName = 3,

  // ---- GPU activity (minor 1), recorded through CUPTI. Timestamps are
  // CLOCK_REALTIME ns, the same clock as the host records (CUPTI's
  // timestamp callback is the library's clock). Ids (device, context,
  // stream, correlation) are CUPTI's. Records entirely outside the window
  // are not written; a record that overlaps a window edge is kept whole.

  // A kernel execution (CUpti_ActivityKernel10).
  kKernel = 10,
  // A memory copy (CUpti_ActivityMemcpy6, or CUpti_ActivityMemcpyPtoP4 for
  // a peer copy: flags bit kMemcpyFlagPeer).
  kMemcpy = 11,
  // A memset (CUpti_ActivityMemset4).
  kMemset = 12,
  // A CUDA runtime or driver API call (CUpti_ActivityAPI).
  kApiCall = 13,
  // A synchronization (CUpti_ActivitySynchronization2).
  kSync = 14,
  // An NVTX range or instant (CUpti_ActivityMarker2 START/END pairs joined
  // by marker id; an instant has start_ns == end_ns and kMarkerFlagInstant).
  // A range still open at window end ends there.
  kMarker = 15,
  // CUPTI or driver overhead (CUpti_ActivityOverhead3).
  kOverhead = 16,
  // Links a CUPTI correlation id to an external id
  // (CUpti_ActivityExternalCorrelation). With external_kind
  // kExternalKindGpuctlRange, external_id is the range_id of the kRange
  // that was open on the launching thread.
  kExternalCorrelation = 17,
  // Properties of one device, for kineto's deviceProperties and occupancy.
  // At most one per device_id per payload.
  kDeviceInfo = 18,
  // How the GPU part of the capture went. Exactly one per payload from a
  // library that supports CUPTI (absent when no GPU activity was asked).
  kCaptureInfo = 19,

  // ---- Device memory (minor 2), the "memory" activity.

  // A device memory allocation or release (CUpti_ActivityMemory4 of
  // CUPTI_ACTIVITY_KIND_MEMORY2): what the CUDA driver hands out or takes
  // back, not what a caching allocator (PyTorch's) gives its tensors.
  kMemory = 20,
  // A memory pool created, destroyed or trimmed (CUpti_ActivityMemoryPool3).
  kMemoryPool = 21,
};

// Every record kind: X(Name, enumerator, minimum size). The table of kind
// Name is GPUCTL_RECORD_FIELDS_<Name>, its struct <Name>Record. The minimum
// size is the kind's size in the minor that introduced it, and never
// changes: a shorter record is refused; in a record of at least that size
// the fields a later minor appended that lie past the record's end read 0.
#define GPUCTL_RECORD_KINDS(X)                     \
  X(Range, kRange, 40)                             \
  X(Step, kStep, 24)                               \
  X(ThreadName, kThreadName, 16)                   \
  X(Kernel, kKernel, 112)                          \
  X(Memcpy, kMemcpy, 80)                           \
  X(Memset, kMemset, 64)                           \
  X(ApiCall, kApiCall, 48)                         \
  X(Sync, kSync, 48)                               \
  X(Marker, kMarker, 48)                           \
  X(Overhead, kOverhead, 48)                       \
  X(ExternalCorrelation, kExternalCorrelation, 24) \
  X(DeviceInfo, kDeviceInfo, 80)                   \
  X(CaptureInfo, kCaptureInfo, 40)                 \
  X(Memory, kMemory, 80)                           \
  X(MemoryPool, kMemoryPool, 64)

// Record tables. Offsets from the start of the record; fields start after
// the 4-byte kind and size.

#define GPUCTL_RECORD_FIELDS_Range(F, PAD) \
  F(uint32_t, tid, 4)                      \
  F(int64_t, start_ns, 8)                  \
  F(int64_t, end_ns, 16)                   \
  F(StringIndex, name, 24)                 \
  F(uint32_t, depth, 28)                   \
  F(uint64_t, range_id, 32)

#define GPUCTL_RECORD_FIELDS_Step(F, PAD) \
  F(uint32_t, tid, 4)                     \
  F(int64_t, ts_ns, 8)                    \
  F(uint64_t, step, 16)

#define GPUCTL_RECORD_FIELDS_ThreadName(F, PAD) \
  F(uint32_t, tid, 4)                           \
  F(StringIndex, name, 8)                       \
  PAD(12, 4)

#define GPUCTL_RECORD_FIELDS_Kernel(F, PAD)                                        \
  F(uint32_t, device_id, 4)                                                        \
  F(uint32_t, context_id, 8)                                                       \
  F(uint32_t, stream_id, 12)                                                       \
  F(uint32_t, correlation_id, 16) /* links to the launching kApiCall */            \
  F(StringIndex, name, 20)        /* the mangled or demangled name CUPTI gives */  \
  F(int64_t, start_ns, 24)                                                         \
  F(int64_t, end_ns, 32)                                                           \
  F(I32x3, grid, 40)  /* x, y, z; each >= 1 */                                     \
  F(I32x3, block, 52) /* x, y, z; each >= 1 */                                     \
  F(uint32_t, registers_per_thread, 64)                                            \
  F(uint32_t, static_shared_memory, 68)    /* bytes per block */                   \
  F(uint32_t, dynamic_shared_memory, 72)   /* bytes per block */                   \
  F(uint32_t, graph_id, 76)                /* 0: not launched from a CUDA graph */ \
  F(uint64_t, graph_node_id, 80)           /* 0: not from a graph */               \
  F(uint32_t, shared_memory_executed, 88)  /* bytes of shared memory per SM */     \
  F(uint32_t, local_memory_per_thread, 92) /* bytes */                             \
  F(uint64_t, queued_ns, 96)               /* 0: unknown */                        \
  F(uint32_t, cache_config_executed, 104)                                          \
  F(uint32_t, launch_type, 108) /* CUpti_ActivityLaunchType */

#define GPUCTL_RECORD_FIELDS_Memcpy(F, PAD)                                       \
  F(uint32_t, device_id, 4)                                                       \
  F(uint32_t, context_id, 8)                                                      \
  F(uint32_t, stream_id, 12)                                                      \
  F(uint32_t, correlation_id, 16)                                                 \
  F(uint8_t, copy_kind, 20) /* CUpti_ActivityMemcpyKind: 1 HtoD, 2 DtoH, 8 DtoD,  \
                               10 PtoP, ... */                                    \
  F(uint8_t, src_kind, 21)  /* CUpti_ActivityMemoryKind */                        \
  F(uint8_t, dst_kind, 22)                                                        \
  F(uint8_t, flags, 23) /* kMemcpyFlagAsync, kMemcpyFlagPeer */                   \
  F(int64_t, start_ns, 24)                                                        \
  F(int64_t, end_ns, 32)                                                          \
  F(uint64_t, bytes, 40)                                                          \
  F(uint32_t, src_device, 48) /* peer copies; otherwise device_id / context_id */ \
  F(uint32_t, dst_device, 52)                                                     \
  F(uint32_t, src_context, 56)                                                    \
  F(uint32_t, dst_context, 60)                                                    \
  F(uint32_t, graph_id, 64)                                                       \
  PAD(68, 4)                                                                      \
  F(uint64_t, graph_node_id, 72)

#define GPUCTL_RECORD_FIELDS_Memset(F, PAD)                   \
  F(uint32_t, device_id, 4)                                   \
  F(uint32_t, context_id, 8)                                  \
  F(uint32_t, stream_id, 12)                                  \
  F(uint32_t, correlation_id, 16)                             \
  F(uint32_t, value, 20)                                      \
  F(int64_t, start_ns, 24)                                    \
  F(int64_t, end_ns, 32)                                      \
  F(uint64_t, bytes, 40)                                      \
  F(uint16_t, memory_kind, 48) /* CUpti_ActivityMemoryKind */ \
  F(uint16_t, flags, 50)       /* kMemsetFlagAsync */         \
  F(uint32_t, graph_id, 52)                                   \
  F(uint64_t, graph_node_id, 56)

#define GPUCTL_RECORD_FIELDS_ApiCall(F, PAD)                         \
  F(uint32_t, domain, 4) /* kApiDomainRuntime or kApiDomainDriver */ \
  F(uint32_t, cbid, 8)   /* CUPTI callback id of the function */     \
  F(uint32_t, correlation_id, 12)                                    \
  F(uint32_t, pid, 16)                                               \
  F(uint32_t, tid, 20)                                               \
  F(int64_t, start_ns, 24)                                           \
  F(int64_t, end_ns, 32)                                             \
  F(StringIndex, name, 40) /* e.g. "cudaLaunchKernel" */             \
  F(uint32_t, return_value, 44)

#define GPUCTL_RECORD_FIELDS_Sync(F, PAD)                                         \
  F(uint32_t, type, 4) /* CUpti_ActivitySynchronizationType: 1 event synchronize, \
                          2 stream wait event, 3 stream synchronize, 4 context    \
                          synchronize */                                          \
  F(uint32_t, context_id, 8)                                                      \
  F(uint32_t, stream_id, 12)     /* kInvalidId when not applicable */             \
  F(uint32_t, cuda_event_id, 16) /* kInvalidId when not applicable */             \
  F(uint32_t, correlation_id, 20)                                                 \
  F(int64_t, start_ns, 24)                                                        \
  F(int64_t, end_ns, 32)                                                          \
  F(uint32_t, return_value, 40)                                                   \
  PAD(44, 4)

#define GPUCTL_RECORD_FIELDS_Marker(F, PAD)                \
  F(uint32_t, pid, 4)                                      \
  F(uint32_t, tid, 8)                                      \
  F(uint32_t, marker_id, 12)                               \
  F(int64_t, start_ns, 16)                                 \
  F(int64_t, end_ns, 24)                                   \
  F(StringIndex, name, 32)                                 \
  F(StringIndex, domain, 36) /* "" = the default domain */ \
  F(uint32_t, flags, 40)     /* kMarkerFlagInstant */      \
  PAD(44, 4)

#define GPUCTL_RECORD_FIELDS_Overhead(F, PAD)                                     \
  F(uint32_t, overhead_kind, 4) /* CUpti_ActivityOverheadKind */                  \
  F(uint32_t, object_kind, 8)   /* CUpti_ActivityObjectKind: 1 process, 2 thread, \
                                   3 device, 4 context, 5 stream */               \
  F(U32x3, object_id, 12)       /* process or device id; thread or context id;    \
                                   stream id (0 for process/thread objects) */    \
  F(int64_t, start_ns, 24)                                                        \
  F(int64_t, end_ns, 32)                                                          \
  F(uint32_t, correlation_id, 40)                                                 \
  PAD(44, 4)

#define GPUCTL_RECORD_FIELDS_ExternalCorrelation(F, PAD)            \
  F(uint32_t, external_kind, 4) /* CUpti_ExternalCorrelationKind */ \
  F(uint32_t, correlation_id, 8)                                    \
  PAD(12, 4)                                                        \
  F(uint64_t, external_id, 16)

#define GPUCTL_RECORD_FIELDS_DeviceInfo(F, PAD)                   \
  F(uint32_t, device_id, 4)                                       \
  F(StringIndex, name, 8)                                         \
  F(uint32_t, compute_major, 12)                                  \
  F(uint32_t, compute_minor, 16)                                  \
  F(uint32_t, sm_count, 20)                                       \
  F(uint32_t, max_threads_per_sm, 24)                             \
  F(uint32_t, max_threads_per_block, 28)                          \
  F(uint32_t, max_registers_per_sm, 32)                           \
  F(uint32_t, max_registers_per_block, 36)                        \
  F(uint32_t, max_shared_memory_per_sm, 40)                       \
  F(uint32_t, max_shared_memory_per_block, 44)                    \
  F(uint32_t, max_blocks_per_sm, 48)                              \
  F(uint32_t, warp_size, 52)                                      \
  F(uint64_t, global_memory_bytes, 56)                            \
  F(uint64_t, global_memory_bandwidth, 64) /* KiB/s; 0 unknown */ \
  F(uint32_t, l2_cache_bytes, 72)                                 \
  F(uint32_t, core_clock_khz, 76) /* 0 unknown */

#define GPUCTL_RECORD_FIELDS_CaptureInfo(F, PAD)                                    \
  F(uint32_t, flags, 4)             /* kCaptureFlag* */                             \
  F(uint32_t, activities, 8)        /* kActivity* bits that were enabled */         \
  F(uint32_t, cupti_version, 12)    /* cuptiGetVersion; 0 when not loaded */        \
  F(uint64_t, dropped_by_cupti, 16) /* cuptiActivityGetNumDroppedRecords */         \
  F(uint64_t, dropped_at_cap, 24)   /* records lost to the buffer cap */            \
  F(StringIndex, message, 32)       /* why host-only, or what failed; "" if none */ \
  F(StringIndex, cupti_path, 36)    /* the library loaded; "" if none */

#define GPUCTL_RECORD_FIELDS_Memory(F, PAD)                                          \
  F(uint32_t, device_id, 4)                                                          \
  F(uint32_t, context_id, 8)                                                         \
  F(uint32_t, stream_id, 12) /* kInvalidId when not stream-ordered */                \
  F(uint32_t, correlation_id, 16)                                                    \
  F(uint8_t, operation, 20)   /* kMemoryOpAllocation or kMemoryOpRelease */          \
  F(uint8_t, memory_kind, 21) /* CUpti_ActivityMemoryKind */                         \
  F(uint8_t, flags, 22)       /* kMemoryFlagAsync */                                 \
  F(uint8_t, pool_type, 23)   /* CUpti_ActivityMemoryPoolType; 0: not from a pool */ \
  F(int64_t, ts_ns, 24)                                                              \
  F(uint64_t, address, 32)                                                           \
  F(uint64_t, bytes, 40)                                                             \
  F(uint64_t, pool_address, 48) /* the pool's fields: 0 when pool_type is 0 */       \
  F(uint64_t, pool_release_threshold, 56)                                            \
  F(uint64_t, pool_size, 64)                                                         \
  F(uint64_t, pool_utilized, 72)

#define GPUCTL_RECORD_FIELDS_MemoryPool(F, PAD)                                     \
  F(uint32_t, device_id, 4)                                                         \
  F(uint32_t, correlation_id, 8)                                                    \
  F(uint8_t, operation, 12) /* kPoolOpCreated, kPoolOpDestroyed, kPoolOpTrimmed */  \
  F(uint8_t, pool_type, 13) /* CUpti_ActivityMemoryPoolType: 1 local, 2 imported */ \
  F(uint8_t, flags, 14)     /* kMemoryPoolFlagManaged */                            \
  PAD(15, 1)                                                                        \
  F(int64_t, ts_ns, 16)                                                             \
  F(uint64_t, address, 24)                                                          \
  F(uint64_t, size, 32) /* bytes the pool holds */                                  \
  F(uint64_t, release_threshold, 40)                                                \
  F(uint64_t, utilized, 48)          /* bytes of the pool in use */                 \
  F(uint64_t, min_bytes_to_keep, 56) /* a trim's argument */

// kMemcpy flags.
inline constexpr uint8_t kMemcpyFlagAsync = 1;
inline constexpr uint8_t kMemcpyFlagPeer = 2;
// kMemset flags.
inline constexpr uint16_t kMemsetFlagAsync = 1;
// kApiCall domains.
inline constexpr uint32_t kApiDomainRuntime = 1;
inline constexpr uint32_t kApiDomainDriver = 2;
// kMemory operations (CUpti_ActivityMemoryOperationType) and flags.
inline constexpr uint8_t kMemoryOpAllocation = 1;
inline constexpr uint8_t kMemoryOpRelease = 2;
inline constexpr uint8_t kMemoryFlagAsync = 1;  // cudaMallocAsync / cudaFreeAsync
// kMemoryPool operations (CUpti_ActivityMemoryPoolOperationType) and flags.
inline constexpr uint8_t kPoolOpCreated = 1;
inline constexpr uint8_t kPoolOpDestroyed = 2;
inline constexpr uint8_t kPoolOpTrimmed = 3;
inline constexpr uint8_t kMemoryPoolFlagManaged = 1;
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
inline constexpr uint32_t kActivityMemory = 256;    // "memory": kMemory, kMemoryPool
// Used when StartCapture.activities is empty. "driver" and "memory" are
// asked for by name only.
inline constexpr uint32_t kDefaultActivities = kActivityKernel | kActivityMemcpy | kActivityMemset |
                                               kActivityRuntime | kActivitySync | kActivityNvtx |
                                               kActivityOverhead;

// ---- What the tables generate.

#define GPUCTL_RECORDS_MEMBER_(type, name, offset) type name{};
#define GPUCTL_RECORDS_NO_MEMBER_(offset, bytes)

// One struct per table, field for field in wire order; reserved bytes have
// no member. String fields hold indexes into whichever string table the
// holder uses.
struct PayloadHeader {
  GPUCTL_RECORD_HEADER_FIELDS(GPUCTL_RECORDS_MEMBER_, GPUCTL_RECORDS_NO_MEMBER_)
};
#define GPUCTL_RECORDS_STRUCT_(Name, kind, min_size)                               \
  struct Name##Record {                                                            \
    GPUCTL_RECORD_FIELDS_##Name(GPUCTL_RECORDS_MEMBER_, GPUCTL_RECORDS_NO_MEMBER_) \
  };
GPUCTL_RECORD_KINDS(GPUCTL_RECORDS_STRUCT_)
#undef GPUCTL_RECORDS_STRUCT_
#undef GPUCTL_RECORDS_NO_MEMBER_
#undef GPUCTL_RECORDS_MEMBER_

// One field or reserved span of a table (name null for reserved bytes).
struct FieldSpan {
  const char* name;
  uint16_t offset;
  uint16_t width;
  uint16_t align;  // the size of one element
};

template <typename T>
inline constexpr uint16_t kElementSize = sizeof(T);
template <typename T, size_t N>
inline constexpr uint16_t kElementSize<std::array<T, N>> = sizeof(T);

template <size_t N>
constexpr uint16_t EndOf(const FieldSpan (&fields)[N]) {
  return fields[N - 1].offset + fields[N - 1].width;
}

// Fields follow each other from `begin` without gaps or overlaps, each at
// its natural alignment; `min_size` ends a field; the record's size is a
// multiple of 4.
template <size_t N>
constexpr bool Tiles(const FieldSpan (&fields)[N], uint16_t begin, uint16_t min_size) {
  uint16_t at = begin;
  bool min_on_boundary = min_size == begin;
  for (const FieldSpan& f : fields) {
    if (f.offset != at || f.offset % f.align != 0) return false;
    at = static_cast<uint16_t>(at + f.width);
    min_on_boundary = min_on_boundary || at == min_size;
  }
  return at % 4 == 0 && min_on_boundary && min_size <= at;
}

// Layout<R>: the table of R as data. kBegin is the offset of the first
// field, kSize the record's size (as written), kMinSize the smallest size
// a reader accepts.
template <typename R>
struct Layout;

#define GPUCTL_RECORDS_SPAN_(type, name, offset) \
  FieldSpan{#name, offset, sizeof(type), kElementSize<type>},
#define GPUCTL_RECORDS_PAD_SPAN_(offset, bytes) FieldSpan{nullptr, offset, bytes, 1},

template <>
struct Layout<PayloadHeader> {
  static constexpr FieldSpan kFields[] = {
      GPUCTL_RECORD_HEADER_FIELDS(GPUCTL_RECORDS_SPAN_, GPUCTL_RECORDS_PAD_SPAN_)};
  static constexpr uint16_t kBegin = 0;
  static constexpr uint16_t kSize = EndOf(kFields);
  static constexpr uint16_t kMinSize = kHeaderSize;
};
static_assert(Layout<PayloadHeader>::kSize == kHeaderSize);
static_assert(Tiles(Layout<PayloadHeader>::kFields, 0, kHeaderSize));

#define GPUCTL_RECORDS_LAYOUT_(Name, kind_, min_size)                                 \
  template <>                                                                         \
  struct Layout<Name##Record> {                                                       \
    static constexpr Kind kKind = Kind::kind_;                                        \
    static constexpr FieldSpan kFields[] = {                                          \
        GPUCTL_RECORD_FIELDS_##Name(GPUCTL_RECORDS_SPAN_, GPUCTL_RECORDS_PAD_SPAN_)}; \
    static constexpr uint16_t kBegin = kRecordPrefixSize;                             \
    static constexpr uint16_t kSize = EndOf(kFields);                                 \
    static constexpr uint16_t kMinSize = min_size;                                    \
  };                                                                                  \
  static_assert(Tiles(Layout<Name##Record>::kFields, kRecordPrefixSize, min_size),    \
                "GPUCTL_RECORD_FIELDS_" #Name " leaves a gap or misaligns a field");  \
  inline constexpr uint16_t k##Name##Size = Layout<Name##Record>::kSize;
// Defines kRangeSize, kStepSize, ..., kCaptureInfoSize.
GPUCTL_RECORD_KINDS(GPUCTL_RECORDS_LAYOUT_)
#undef GPUCTL_RECORDS_LAYOUT_
#undef GPUCTL_RECORDS_SPAN_
#undef GPUCTL_RECORDS_PAD_SPAN_

// The offset of field `name` of R; -1 when R has none.
template <typename R>
constexpr int OffsetOf(const char* name) {
  for (const FieldSpan& f : Layout<R>::kFields) {
    if (f.name == nullptr) continue;
    const char* a = f.name;
    const char* b = name;
    while (*a != '\0' && *a == *b) ++a, ++b;
    if (*a == *b) return f.offset;
  }
  return -1;
}

}  // namespace gpuctl::records

#endif  // GPUCTL_PROTO_GPUCTL_V1_RECORDS_H_
