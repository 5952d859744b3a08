// Encoders of the GPU record kinds; layouts in proto/gpuctl/v1/records.h.
#include <cassert>

#include "client_lib/src/record_writer.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::client {
namespace {

using records::Kind;

// Checks in debug builds that an encoder wrote exactly its declared size.
class SizeCheck {
 public:
  SizeCheck(const std::string& out, uint16_t size) : out_(out), end_(out.size() + size - 4) {}
  ~SizeCheck() { assert(out_.size() == end_); }

 private:
  // Read by the assert only: unused under NDEBUG.
  [[maybe_unused]] const std::string& out_;
  [[maybe_unused]] size_t end_;
};

}  // namespace

void RecordWriter::Add(const KernelRecord& r) {
  BeginRecord(static_cast<uint16_t>(Kind::kKernel), records::kKernelSize);
  SizeCheck check(events_, records::kKernelSize);
  std::string* o = &events_;
  AppendU32(o, r.device_id);
  AppendU32(o, r.context_id);
  AppendU32(o, r.stream_id);
  AppendU32(o, r.correlation_id);
  AppendU32(o, r.name);
  AppendI64(o, r.start_ns);
  AppendI64(o, r.end_ns);
  for (int32_t v : r.grid) AppendI32(o, v);
  for (int32_t v : r.block) AppendI32(o, v);
  AppendU32(o, r.registers_per_thread);
  AppendU32(o, r.static_shared_memory);
  AppendU32(o, r.dynamic_shared_memory);
  AppendU32(o, r.graph_id);
  AppendU64(o, r.graph_node_id);
  AppendU32(o, r.shared_memory_executed);
  AppendU32(o, r.local_memory_per_thread);
  AppendI64(o, r.queued_ns);
  AppendU32(o, r.cache_config_executed);
  AppendU32(o, r.launch_type);
}

void RecordWriter::Add(const MemcpyRecord& r) {
  BeginRecord(static_cast<uint16_t>(Kind::kMemcpy), records::kMemcpySize);
  SizeCheck check(events_, records::kMemcpySize);
  std::string* o = &events_;
  AppendU32(o, r.device_id);
  AppendU32(o, r.context_id);
  AppendU32(o, r.stream_id);
  AppendU32(o, r.correlation_id);
  AppendU8(o, r.copy_kind);
  AppendU8(o, r.src_kind);
  AppendU8(o, r.dst_kind);
  AppendU8(o, r.flags);
  AppendI64(o, r.start_ns);
  AppendI64(o, r.end_ns);
  AppendU64(o, r.bytes);
  AppendU32(o, r.src_device);
  AppendU32(o, r.dst_device);
  AppendU32(o, r.src_context);
  AppendU32(o, r.dst_context);
  AppendU32(o, r.graph_id);
  AppendU32(o, 0);
  AppendU64(o, r.graph_node_id);
}

void RecordWriter::Add(const MemsetRecord& r) {
  BeginRecord(static_cast<uint16_t>(Kind::kMemset), records::kMemsetSize);
  SizeCheck check(events_, records::kMemsetSize);
  std::string* o = &events_;
  AppendU32(o, r.device_id);
  AppendU32(o, r.context_id);
  AppendU32(o, r.stream_id);
  AppendU32(o, r.correlation_id);
  AppendU32(o, r.value);
  AppendI64(o, r.start_ns);
  AppendI64(o, r.end_ns);
  AppendU64(o, r.bytes);
  AppendU16(o, r.memory_kind);
  AppendU16(o, r.flags);
  AppendU32(o, r.graph_id);
  AppendU64(o, r.graph_node_id);
}

void RecordWriter::Add(const ApiCallRecord& r) {
  BeginRecord(static_cast<uint16_t>(Kind::kApiCall), records::kApiCallSize);
  SizeCheck check(events_, records::kApiCallSize);
  std::string* o = &events_;
  AppendU32(o, r.domain);
  AppendU32(o, r.cbid);
  AppendU32(o, r.correlation_id);
  AppendU32(o, r.pid);
  AppendU32(o, r.tid);
  AppendI64(o, r.start_ns);
  AppendI64(o, r.end_ns);
  AppendU32(o, r.name);
  AppendU32(o, r.return_value);
}

void RecordWriter::Add(const SyncRecord& r) {
  BeginRecord(static_cast<uint16_t>(Kind::kSync), records::kSyncSize);
  SizeCheck check(events_, records::kSyncSize);
  std::string* o = &events_;
  AppendU32(o, r.type);
  AppendU32(o, r.context_id);
  AppendU32(o, r.stream_id);
  AppendU32(o, r.cuda_event_id);
  AppendU32(o, r.correlation_id);
  AppendI64(o, r.start_ns);
  AppendI64(o, r.end_ns);
  AppendU32(o, r.return_value);
  AppendU32(o, 0);
}

void RecordWriter::Add(const MarkerRecord& r) {
  BeginRecord(static_cast<uint16_t>(Kind::kMarker), records::kMarkerSize);
  SizeCheck check(events_, records::kMarkerSize);
  std::string* o = &events_;
  AppendU32(o, r.pid);
  AppendU32(o, r.tid);
  AppendU32(o, r.marker_id);
  AppendI64(o, r.start_ns);
  AppendI64(o, r.end_ns);
  AppendU32(o, r.name);
  AppendU32(o, r.domain);
  AppendU32(o, r.flags);
  AppendU32(o, 0);
}

void RecordWriter::Add(const OverheadRecord& r) {
  BeginRecord(static_cast<uint16_t>(Kind::kOverhead), records::kOverheadSize);
  SizeCheck check(events_, records::kOverheadSize);
  std::string* o = &events_;
  AppendU32(o, r.overhead_kind);
  AppendU32(o, r.object_kind);
  for (uint32_t v : r.object_id) AppendU32(o, v);
  AppendI64(o, r.start_ns);
  AppendI64(o, r.end_ns);
  AppendU32(o, r.correlation_id);
  AppendU32(o, 0);
}

void RecordWriter::Add(const ExternalCorrelationRecord& r) {
  BeginRecord(static_cast<uint16_t>(Kind::kExternalCorrelation), records::kExternalCorrelationSize);
  SizeCheck check(events_, records::kExternalCorrelationSize);
  std::string* o = &events_;
  AppendU32(o, r.external_kind);
  AppendU32(o, r.correlation_id);
  AppendU32(o, 0);
  AppendU64(o, r.external_id);
}

void RecordWriter::Add(const DeviceInfoRecord& r) {
  BeginRecord(static_cast<uint16_t>(Kind::kDeviceInfo), records::kDeviceInfoSize);
  SizeCheck check(events_, records::kDeviceInfoSize);
  std::string* o = &events_;
  AppendU32(o, r.device_id);
  AppendU32(o, r.name);
  AppendU32(o, r.compute_major);
  AppendU32(o, r.compute_minor);
  AppendU32(o, r.sm_count);
  AppendU32(o, r.max_threads_per_sm);
  AppendU32(o, r.max_threads_per_block);
  AppendU32(o, r.max_registers_per_sm);
  AppendU32(o, r.max_registers_per_block);
  AppendU32(o, r.max_shared_memory_per_sm);
  AppendU32(o, r.max_shared_memory_per_block);
  AppendU32(o, r.max_blocks_per_sm);
  AppendU32(o, r.warp_size);
  AppendU64(o, r.global_memory_bytes);
  AppendU64(o, r.global_memory_bandwidth);
  AppendU32(o, r.l2_cache_bytes);
  AppendU32(o, r.core_clock_khz);
}

void RecordWriter::Add(const CaptureInfoRecord& r) {
  BeginRecord(static_cast<uint16_t>(Kind::kCaptureInfo), records::kCaptureInfoSize);
  SizeCheck check(events_, records::kCaptureInfoSize);
  std::string* o = &events_;
  AppendU32(o, r.flags);
  AppendU32(o, r.activities);
  AppendU32(o, r.cupti_version);
  AppendU64(o, r.dropped_by_cupti);
  AppendU64(o, r.dropped_at_cap);
  AppendU32(o, r.message);
  AppendU32(o, r.cupti_path);
}

}  // namespace gpuctl::client
