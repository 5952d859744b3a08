#ifndef GPUCTL_DAEMON_CONVERT_KINETO_TRACE_H_
#define GPUCTL_DAEMON_CONVERT_KINETO_TRACE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuctl::daemon {

// gpuctl's identity for a kineto trace file.
struct KinetoTraceTag {
  std::string trace_id, host;
  int32_t rank = -1;
  int32_t pid = 0;
  std::string job_id;
};

struct KinetoTraceSummary {
  uint64_t event_count = 0, cpu_op_count = 0, kernel_count = 0;
  int64_t first_ts_unix_ns = 0, last_ts_unix_ns = 0;
  std::string trace_id_in_file;  // kineto's REQUEST_TRACE_ID echo, if any
};

struct KinetoConverted {
  std::string gzip;
  KinetoTraceSummary summary;
};

// Validates a kineto JSON trace, tags it with `tag` and gzips it.
// INVALID_ARGUMENT naming the byte offset for malformed JSON or a file
// that is not a kineto trace; never crashes on any input.
absl::StatusOr<KinetoConverted> ConvertKinetoTrace(absl::string_view json,
                                                   const KinetoTraceTag& tag, int gzip_level);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CONVERT_KINETO_TRACE_H_
