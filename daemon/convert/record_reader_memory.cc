// Validation of the device memory kinds (records.h, minor 2). Unlike the
// other kinds, a memory record with a value out of range is skipped and
// counted (DecodedRecords::skipped_memory_records), never an error: the
// counter track loses one sample, the rest of the payload stays.
#include <cstdint>

#include "daemon/convert/record_decode.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::daemon::record_decode {
namespace {

namespace rec = ::gpuctl::records;

// Device ids above this are not a device: more than any host has.
constexpr uint32_t kMaxMemoryDeviceId = 1023;
// Larger than any device's memory (2^40 = 1 TiB); keeps every sum of a
// payload's sizes far from 64-bit overflow.
constexpr uint64_t kMaxMemoryBytes = uint64_t{1} << 40;
// CUpti_ActivityMemoryKind: UNKNOWN .. MANAGED_STATIC.
constexpr uint8_t kMaxMemoryKind = 7;
// CUpti_ActivityMemoryPoolType: INVALID (not from a pool), LOCAL, IMPORTED.
constexpr uint8_t kMaxPoolType = 2;

bool InWindow(int64_t ts, Limits limits) { return ts >= limits.lo && ts <= limits.hi; }

bool ValidMemory(const MemoryRecord& m, Limits limits) {
  if (m.operation != rec::kMemoryOpAllocation && m.operation != rec::kMemoryOpRelease) {
    return false;
  }
  // A release may leave its size to the allocation it frees (bytes 0).
  if (m.operation == rec::kMemoryOpAllocation && m.bytes == 0) return false;
  return m.device_id <= kMaxMemoryDeviceId && m.memory_kind <= kMaxMemoryKind &&
         m.pool_type <= kMaxPoolType && m.bytes <= kMaxMemoryBytes &&
         m.pool_size <= kMaxMemoryBytes && m.pool_utilized <= kMaxMemoryBytes &&
         InWindow(m.ts_ns, limits);
}

bool ValidMemoryPool(const MemoryPoolRecord& p, Limits limits) {
  return p.operation >= rec::kPoolOpCreated && p.operation <= rec::kPoolOpTrimmed &&
         p.pool_type <= kMaxPoolType && p.device_id <= kMaxMemoryDeviceId &&
         p.size <= kMaxMemoryBytes && p.utilized <= kMaxMemoryBytes && InWindow(p.ts_ns, limits);
}

}  // namespace

absl::Status Accept(uint64_t /*index*/, const MemoryRecord& m, Limits limits, DecodedRecords* out) {
  if (ValidMemory(m, limits)) {
    out->memory_ops.push_back(m);
  } else {
    ++out->skipped_memory_records;
  }
  return absl::OkStatus();
}

absl::Status Accept(uint64_t /*index*/, const MemoryPoolRecord& p, Limits limits,
                    DecodedRecords* out) {
  if (ValidMemoryPool(p, limits)) {
    out->memory_pools.push_back(p);
  } else {
    ++out->skipped_memory_records;
  }
  return absl::OkStatus();
}

}  // namespace gpuctl::daemon::record_decode
