#ifndef GPUCTL_DAEMON_CONVERT_RECORD_READER_H_
#define GPUCTL_DAEMON_CONVERT_RECORD_READER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace gpuctl::daemon {

// Decoded records of one capture payload (proto/gpuctl/v1/records.h).
// String views point into the payload, which must outlive this object.
// String bytes are not checked for UTF-8; writers must sanitize them.

struct RangeRecord {
  uint32_t tid;
  int64_t start_ns;
  int64_t end_ns;
  uint32_t name;  // index into DecodedRecords::strings
  uint32_t depth;
  uint64_t range_id;
};

struct StepRecord {
  uint32_t tid;
  int64_t ts_ns;
  uint64_t step;
};

struct ThreadNameRecord {
  uint32_t tid;
  uint32_t name;  // index into DecodedRecords::strings
};

// GPU records (minor 1). Field meanings as in records.h; ids are CUPTI's.
struct KernelRecord {
  uint32_t device_id;
  uint32_t context_id;
  uint32_t stream_id;
  uint32_t correlation_id;
  uint32_t name;  // index into DecodedRecords::strings
  int64_t start_ns;
  int64_t end_ns;
  int32_t grid[3];   // each >= 1
  int32_t block[3];  // each >= 1
  uint32_t registers_per_thread;
  uint32_t static_shared_memory;
  uint32_t dynamic_shared_memory;
  uint32_t graph_id;
  uint64_t graph_node_id;
  uint32_t shared_memory_executed;
  uint32_t local_memory_per_thread;
  uint64_t queued_ns;
  uint32_t cache_config_executed;
  uint32_t launch_type;
};

struct MemcpyRecord {
  uint32_t device_id;
  uint32_t context_id;
  uint32_t stream_id;
  uint32_t correlation_id;
  uint8_t copy_kind;
  uint8_t src_kind;
  uint8_t dst_kind;
  uint8_t flags;
  int64_t start_ns;
  int64_t end_ns;
  uint64_t bytes;
  uint32_t src_device;
  uint32_t dst_device;
  uint32_t src_context;
  uint32_t dst_context;
  uint32_t graph_id;
  uint64_t graph_node_id;
};

struct MemsetRecord {
  uint32_t device_id;
  uint32_t context_id;
  uint32_t stream_id;
  uint32_t correlation_id;
  uint32_t value;
  int64_t start_ns;
  int64_t end_ns;
  uint64_t bytes;
  uint16_t memory_kind;
  uint16_t flags;
  uint32_t graph_id;
  uint64_t graph_node_id;
};

struct ApiCallRecord {
  uint32_t domain;  // records::kApiDomainRuntime or kApiDomainDriver
  uint32_t cbid;
  uint32_t correlation_id;
  uint32_t pid;
  uint32_t tid;
  int64_t start_ns;
  int64_t end_ns;
  uint32_t name;  // index into DecodedRecords::strings
  uint32_t return_value;
};

struct SyncRecord {
  uint32_t type;
  uint32_t context_id;
  uint32_t stream_id;      // records::kInvalidId when not applicable
  uint32_t cuda_event_id;  // records::kInvalidId when not applicable
  uint32_t correlation_id;
  int64_t start_ns;
  int64_t end_ns;
  uint32_t return_value;
};

struct MarkerRecord {
  uint32_t pid;
  uint32_t tid;
  uint32_t marker_id;
  int64_t start_ns;
  int64_t end_ns;
  uint32_t name;    // index into DecodedRecords::strings
  uint32_t domain;  // index into DecodedRecords::strings ("" = default)
  uint32_t flags;
};

struct OverheadRecord {
  uint32_t overhead_kind;
  uint32_t object_kind;
  uint32_t object_id[3];
  int64_t start_ns;
  int64_t end_ns;
  uint32_t correlation_id;
};

struct ExternalCorrelationRecord {
  uint32_t external_kind;
  uint32_t correlation_id;
  uint64_t external_id;
};

// At most one per device_id in a payload.
struct DeviceInfoRecord {
  uint32_t device_id;
  uint32_t name;  // index into DecodedRecords::strings
  uint32_t compute_major;
  uint32_t compute_minor;
  uint32_t sm_count;
  uint32_t max_threads_per_sm;
  uint32_t max_threads_per_block;
  uint32_t max_registers_per_sm;
  uint32_t max_registers_per_block;
  uint32_t max_shared_memory_per_sm;
  uint32_t max_shared_memory_per_block;
  uint32_t max_blocks_per_sm;
  uint32_t warp_size;
  uint64_t global_memory_bytes;
  uint64_t global_memory_bandwidth_kib_s;
  uint32_t l2_cache_bytes;
  uint32_t core_clock_khz;
};

// At most one per payload.
struct CaptureInfoRecord {
  uint32_t flags;       // records::kCaptureFlag*
  uint32_t activities;  // records::kActivity* bits
  uint32_t cupti_version;
  uint64_t dropped_by_cupti;
  uint64_t dropped_at_cap;
  uint32_t message;     // index into DecodedRecords::strings
  uint32_t cupti_path;  // index into DecodedRecords::strings
};

struct DecodedRecords {
  uint16_t version_minor = 0;
  uint64_t event_count = 0;
  uint64_t dropped_events = 0;
  uint64_t unknown_records = 0;  // records of kinds this reader skips
  int64_t window_start_ns = 0;
  int64_t window_end_ns = 0;
  int32_t pid = 0;
  std::vector<absl::string_view> strings;
  // Each in payload order.
  std::vector<RangeRecord> ranges;
  std::vector<StepRecord> steps;
  std::vector<ThreadNameRecord> thread_names;
  std::vector<KernelRecord> kernels;
  std::vector<MemcpyRecord> memcpys;
  std::vector<MemsetRecord> memsets;
  std::vector<ApiCallRecord> api_calls;
  std::vector<SyncRecord> syncs;
  std::vector<MarkerRecord> markers;
  std::vector<OverheadRecord> overheads;
  std::vector<ExternalCorrelationRecord> external_correlations;
  std::vector<DeviceInfoRecord> device_infos;
  std::optional<CaptureInfoRecord> capture_info;
};

struct RecordReaderOptions {
  // The pid the kernel reported for the sending process; the header must
  // carry the same.
  int32_t expected_pid = 0;
  // How far outside the header's window an event timestamp may lie (ranges
  // opened just before the window, clock steps).
  absl::Duration timestamp_slack = absl::Seconds(5);
  // Longest window accepted. Windows must also lie within [0, 2^62] ns so
  // that timestamp arithmetic downstream cannot overflow.
  absl::Duration max_window = absl::Hours(24);
};

// Parses and validates a whole payload of major version 1, any minor
// version. Every offset, size, count and index is checked before use; every
// interval must have end >= start and lie within the window widened by the
// slack; kernel grid and block dimensions must be positive; API calls must
// name a known domain; a device may be described once and the capture info
// given once. Kinds this reader does not know are counted and skipped. An
// error names the first problem found, e.g.
// "record 17: string index 99 >= string count 12" (INVALID_ARGUMENT).
absl::StatusOr<DecodedRecords> ReadRecords(absl::Span<const uint8_t> payload,
                                           const RecordReaderOptions& options);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CONVERT_RECORD_READER_H_
