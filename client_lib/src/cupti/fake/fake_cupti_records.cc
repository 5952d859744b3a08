#include "client_lib/src/cupti/fake/fake_cupti_records.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace gpuctl::client::cupti::fake {

uint32_t Tid() { return static_cast<uint32_t>(syscall(SYS_gettid)); }

std::string Api(CUpti_ActivityKind kind, uint32_t cbid, uint32_t correlation, uint64_t start,
                uint64_t end) {
  CUpti_ActivityAPI a{};
  a.kind = kind;
  a.cbid = cbid;
  a.start = start;
  a.end = end;
  a.processId = static_cast<uint32_t>(getpid());
  a.threadId = Tid();
  a.correlationId = correlation;
  a.returnValue = 0;
  return Bytes(a);
}

std::string Kernel(const char* name, uint32_t device, uint32_t stream, uint32_t correlation,
                   uint64_t start, uint64_t end, uint32_t graph_id, uint64_t graph_node) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.cacheConfig.config.executed = 1;
  k.registersPerThread = 32;
  k.start = start;
  k.end = end;
  k.queued = start - 100;
  k.deviceId = device;
  k.contextId = device + 1;
  k.streamId = stream;
  k.gridX = 4;
  k.gridY = 2;
  k.gridZ = 1;
  k.blockX = 128;
  k.blockY = 1;
  k.blockZ = 1;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 2048;
  k.localMemoryPerThread = 16;
  k.correlationId = correlation;
  k.name = name;
  k.sharedMemoryExecuted = 65536;
  k.graphId = graph_id;
  k.graphNodeId = graph_node;
  k.launchType = 0;
  return Bytes(k);
}

std::string Device(uint32_t id, const char* name) {
  CUpti_ActivityDevice5 d{};
  d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  d.globalMemoryBandwidth = 3'350'000'000;
  d.globalMemorySize = 80ull << 30;
  d.l2CacheSize = 50u << 20;
  d.numThreadsPerWarp = 32;
  d.coreClockRate = 1'980'000;
  d.numMultiprocessors = 132;
  d.maxWarpsPerMultiprocessor = 64;
  d.maxBlocksPerMultiprocessor = 32;
  d.maxSharedMemoryPerMultiprocessor = 233472;
  d.maxRegistersPerMultiprocessor = 65536;
  d.maxRegistersPerBlock = 65536;
  d.maxSharedMemoryPerBlock = 49152;
  d.maxThreadsPerBlock = 1024;
  d.computeCapabilityMajor = 9;
  d.computeCapabilityMinor = 0;
  d.id = id;
  d.name = name;
  return Bytes(d);
}

std::string Memory(CUpti_ActivityMemoryOperationType op, uint32_t device, uint64_t address,
                   uint64_t bytes, uint64_t ts, uint32_t stream, uint64_t pool_bytes) {
  CUpti_ActivityMemory4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = op;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.correlationId = static_cast<uint32_t>(address >> 12);
  m.address = address;
  m.bytes = bytes;
  m.timestamp = ts;
  m.processId = static_cast<uint32_t>(getpid());
  m.deviceId = device;
  m.contextId = device + 1;
  m.streamId = pool_bytes > 0 ? stream : CUPTI_INVALID_STREAM_ID;
  m.isAsync = pool_bytes > 0 ? 1 : 0;
  if (pool_bytes > 0) {
    m.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    m.memoryPoolConfig.address = address & ~((uint64_t{1} << 30) - 1);
    m.memoryPoolConfig.releaseThreshold = 0;
    m.memoryPoolConfig.pool.size = pool_bytes;
    m.memoryPoolConfig.utilizedSize = bytes;
  }
  return Bytes(m);
}

std::string MemoryPool(CUpti_ActivityMemoryPoolOperationType op, uint32_t device, uint64_t address,
                       uint64_t size, uint64_t utilized, uint64_t ts) {
  CUpti_ActivityMemoryPool3 p{};
  p.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
  p.memoryPoolOperationType = op;
  p.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
  p.processId = static_cast<uint32_t>(getpid());
  p.deviceId = device;
  p.address = address;
  p.size = size;
  p.releaseThreshold = 0;
  p.timestamp = ts;
  p.utilizedSize = utilized;
  return Bytes(p);
}

std::string ExternalCorrelation(uint64_t external_id, uint32_t correlation) {
  CUpti_ActivityExternalCorrelation e{};
  e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  e.externalId = external_id;
  e.correlationId = correlation;
  return Bytes(e);
}

}  // namespace gpuctl::client::cupti::fake
