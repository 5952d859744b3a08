// GPU activity records before encoding: one struct per GPU record kind of
// proto/gpuctl/v1/records.h, field for field. String fields hold indexes
// into whichever string table the holder uses (RecordWriter::Add* takes
// indexes of the writer's own table).
#ifndef GPUCTL_CLIENT_LIB_SRC_GPU_RECORDS_H_
#define GPUCTL_CLIENT_LIB_SRC_GPU_RECORDS_H_

#include <cstdint>

namespace gpuctl::client {

struct KernelRecord {
  uint32_t device_id = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;
  uint32_t name = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int32_t grid[3] = {0, 0, 0};
  int32_t block[3] = {0, 0, 0};
  uint32_t registers_per_thread = 0;
  uint32_t static_shared_memory = 0;
  uint32_t dynamic_shared_memory = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
  uint32_t shared_memory_executed = 0;
  uint32_t local_memory_per_thread = 0;
  int64_t queued_ns = 0;
  uint32_t cache_config_executed = 0;
  uint32_t launch_type = 0;
};

struct MemcpyRecord {
  uint32_t device_id = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;
  uint8_t copy_kind = 0;
  uint8_t src_kind = 0;
  uint8_t dst_kind = 0;
  uint8_t flags = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t bytes = 0;
  uint32_t src_device = 0;
  uint32_t dst_device = 0;
  uint32_t src_context = 0;
  uint32_t dst_context = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
};

struct MemsetRecord {
  uint32_t device_id = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;
  uint32_t value = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t bytes = 0;
  uint16_t memory_kind = 0;
  uint16_t flags = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
};

struct ApiCallRecord {
  uint32_t domain = 0;
  uint32_t cbid = 0;
  uint32_t correlation_id = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t name = 0;
  uint32_t return_value = 0;
};

struct SyncRecord {
  uint32_t type = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  uint32_t cuda_event_id = 0;
  uint32_t correlation_id = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t return_value = 0;
};

struct MarkerRecord {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint32_t marker_id = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t name = 0;
  uint32_t domain = 0;
  uint32_t flags = 0;
};

struct OverheadRecord {
  uint32_t overhead_kind = 0;
  uint32_t object_kind = 0;
  uint32_t object_id[3] = {0, 0, 0};
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t correlation_id = 0;
};

struct ExternalCorrelationRecord {
  uint32_t external_kind = 0;
  uint32_t correlation_id = 0;
  uint64_t external_id = 0;
};

struct DeviceInfoRecord {
  uint32_t device_id = 0;
  uint32_t name = 0;
  uint32_t compute_major = 0;
  uint32_t compute_minor = 0;
  uint32_t sm_count = 0;
  uint32_t max_threads_per_sm = 0;
  uint32_t max_threads_per_block = 0;
  uint32_t max_registers_per_sm = 0;
  uint32_t max_registers_per_block = 0;
  uint32_t max_shared_memory_per_sm = 0;
  uint32_t max_shared_memory_per_block = 0;
  uint32_t max_blocks_per_sm = 0;
  uint32_t warp_size = 0;
  uint64_t global_memory_bytes = 0;
  uint64_t global_memory_bandwidth = 0;
  uint32_t l2_cache_bytes = 0;
  uint32_t core_clock_khz = 0;
};

struct CaptureInfoRecord {
  uint32_t flags = 0;
  uint32_t activities = 0;
  uint32_t cupti_version = 0;
  uint64_t dropped_by_cupti = 0;
  uint64_t dropped_at_cap = 0;
  uint32_t message = 0;
  uint32_t cupti_path = 0;
};

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_GPU_RECORDS_H_
