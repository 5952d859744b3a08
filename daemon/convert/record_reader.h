#ifndef GPUCTL_DAEMON_CONVERT_RECORD_READER_H_
#define GPUCTL_DAEMON_CONVERT_RECORD_READER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::daemon {

// Decoded records of one capture payload (proto/gpuctl/v1/records.h): the
// structs its field tables define, field for field. String fields are
// indexes into DecodedRecords::strings, whose views point into the payload,
// which must outlive this object. String bytes are not checked for UTF-8;
// writers must sanitize them.
using records::ApiCallRecord;
using records::CaptureInfoRecord;
using records::DeviceInfoRecord;
using records::ExternalCorrelationRecord;
using records::KernelRecord;  // grid and block dimensions each >= 1
using records::MarkerRecord;
using records::MemcpyRecord;
using records::MemoryPoolRecord;
using records::MemoryRecord;
using records::MemsetRecord;
using records::OverheadRecord;
using records::RangeRecord;
using records::StepRecord;
using records::SyncRecord;
using records::ThreadNameRecord;

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
  std::vector<DeviceInfoRecord> device_infos;     // at most one per device_id
  std::optional<CaptureInfoRecord> capture_info;  // at most one per payload
  // Device memory (the "memory" activity). A memory record that fails its
  // checks is counted here and skipped: it costs one sample of the counter,
  // not the payload.
  std::vector<MemoryRecord> memory_ops;
  std::vector<MemoryPoolRecord> memory_pools;
  uint64_t skipped_memory_records = 0;
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
// given once. Kinds this reader does not know are counted and skipped, and
// so are device memory records with values out of range. An
// error names the first problem found, e.g.
// "record 17: string index 99 >= string count 12" (INVALID_ARGUMENT).
absl::StatusOr<DecodedRecords> ReadRecords(absl::Span<const uint8_t> payload,
                                           const RecordReaderOptions& options);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CONVERT_RECORD_READER_H_
