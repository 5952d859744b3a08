// Builders of the CUPTI record structs the fake delivers, as raw bytes.
// Pointers in a record (kernel and marker names) are not copied: they must
// outlive the record's delivery.
#ifndef GPUCTL_CLIENT_LIB_SRC_CUPTI_FAKE_FAKE_CUPTI_RECORDS_H_
#define GPUCTL_CLIENT_LIB_SRC_CUPTI_FAKE_FAKE_CUPTI_RECORDS_H_

#include <cupti.h>

#include <cstdint>
#include <string>

namespace gpuctl::client::cupti::fake {

template <typename T>
std::string Bytes(const T& record) {
  return std::string(reinterpret_cast<const char*>(&record), sizeof(T));
}

// The calling thread's kernel thread id, as CUPTI reports it.
uint32_t Tid();

// A runtime or driver API record of this process and thread.
std::string Api(CUpti_ActivityKind kind, uint32_t cbid, uint32_t correlation, uint64_t start,
                uint64_t end);
std::string Kernel(const char* name, uint32_t device, uint32_t stream, uint32_t correlation,
                   uint64_t start, uint64_t end, uint32_t graph_id, uint64_t graph_node);
// An H100-like device.
std::string Device(uint32_t id, const char* name);
// A device memory allocation or release (CUPTI_ACTIVITY_KIND_MEMORY2);
// `pool_bytes` > 0 makes it a stream-ordered allocation from a local pool of
// that size (cudaMallocAsync), on `stream`.
std::string Memory(CUpti_ActivityMemoryOperationType op, uint32_t device, uint64_t address,
                   uint64_t bytes, uint64_t ts, uint32_t stream, uint64_t pool_bytes);
// A local memory pool's creation, destruction or trim.
std::string MemoryPool(CUpti_ActivityMemoryPoolOperationType op, uint32_t device, uint64_t address,
                       uint64_t size, uint64_t utilized, uint64_t ts);
// A CUSTOM0 external correlation of `external_id` to `correlation`.
std::string ExternalCorrelation(uint64_t external_id, uint32_t correlation);

}  // namespace gpuctl::client::cupti::fake

#endif  // GPUCTL_CLIENT_LIB_SRC_CUPTI_FAKE_FAKE_CUPTI_RECORDS_H_
