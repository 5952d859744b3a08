// The device memory records of the "memory" activity: CUPTI's allocation
// and release records (CUPTI_ACTIVITY_KIND_MEMORY2) and its memory pool
// records (CUPTI_ACTIVITY_KIND_MEMORY_POOL).
#include <cstdint>

#include "client_lib/src/cupti/activity_translator.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::client::cupti {
namespace {

// The enums CUPTI may extend fit the records' bytes; a value past 255 is
// written as 0 (unknown) so the daemon skips it instead of misreading it.
uint8_t Small(uint32_t v) { return v <= 0xff ? static_cast<uint8_t>(v) : 0; }

}  // namespace

void ActivityTranslator::AddMemory(const CUpti_ActivityMemory4& m) {
  if (!Reserve(records::kMemorySize)) return;
  MemoryRecord r;
  r.device_id = m.deviceId;
  r.context_id = m.contextId;
  r.stream_id = m.streamId;
  r.correlation_id = m.correlationId;
  r.operation = Small(m.memoryOperationType);
  r.memory_kind = Small(m.memoryKind);
  r.flags = m.isAsync != 0 ? records::kMemoryFlagAsync : 0;
  r.ts_ns = Ts(m.timestamp);
  r.address = m.address;
  r.bytes = m.bytes;
  const auto& pool = m.memoryPoolConfig;
  r.pool_type = Small(pool.memoryPoolType);
  if (pool.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID) {
    r.pool_address = pool.address;
    r.pool_release_threshold = pool.releaseThreshold;
    // The union holds the owner's process id for an imported pool.
    r.pool_size = pool.memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL ? pool.pool.size : 0;
    r.pool_utilized = pool.utilizedSize;
  }
  records_.emplace_back(r);
}

void ActivityTranslator::AddMemoryPool(const CUpti_ActivityMemoryPool3& p) {
  if (!Reserve(records::kMemoryPoolSize)) return;
  MemoryPoolRecord r;
  r.device_id = p.deviceId;
  r.correlation_id = p.correlationId;
  r.operation = Small(p.memoryPoolOperationType);
  r.pool_type = Small(p.memoryPoolType);
  r.flags = p.isManagedPool != 0 ? records::kMemoryPoolFlagManaged : 0;
  r.ts_ns = Ts(p.timestamp);
  r.address = p.address;
  r.size = p.size;
  r.release_threshold = p.releaseThreshold;
  r.utilized = p.utilizedSize;
  r.min_bytes_to_keep = p.minBytesToKeep;
  records_.emplace_back(r);
}

}  // namespace gpuctl::client::cupti
