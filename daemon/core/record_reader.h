#ifndef GPUCTL_DAEMON_CORE_RECORD_READER_H_
#define GPUCTL_DAEMON_CORE_RECORD_READER_H_

#include <cstdint>
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

// Parses and validates a whole payload. Every offset, size, count and index
// is checked before use; an error names the first problem found, e.g.
// "record 17: string index 99 >= string count 12" (INVALID_ARGUMENT).
absl::StatusOr<DecodedRecords> ReadRecords(absl::Span<const uint8_t> payload,
                                           const RecordReaderOptions& options);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_RECORD_READER_H_
