// Internal to the record reader: the checks shared by the host and GPU
// record decoders, and the validation of each decoded kind. Not a public
// API.
#ifndef GPUCTL_DAEMON_CONVERT_RECORD_DECODE_H_
#define GPUCTL_DAEMON_CONVERT_RECORD_DECODE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/convert/record_reader.h"

namespace gpuctl::daemon::record_decode {

template <typename... Args>
absl::Status Invalid(const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(args...));
}

// The accepted timestamp range: the window widened by the slack.
struct Limits {
  int64_t lo;
  int64_t hi;
};

inline absl::Status CheckTimestamp(uint64_t index, absl::string_view what, int64_t ts,
                                   Limits limits) {
  if (ts < limits.lo || ts > limits.hi) {
    return Invalid("record ", index, ": ", what, " ", ts, " ns is outside the window [", limits.lo,
                   ", ", limits.hi, "] ns (slack included)");
  }
  return absl::OkStatus();
}

// start <= end, both inside the limits. The message is built only on
// failure: this runs for every record.
inline absl::Status CheckInterval(uint64_t index, absl::string_view what, int64_t start_ns,
                                  int64_t end_ns, Limits limits) {
  if (end_ns < start_ns) {
    return Invalid("record ", index, ": ", what, " ends at ", end_ns, " ns before it starts at ",
                   start_ns, " ns");
  }
  if (start_ns < limits.lo || start_ns > limits.hi) {
    return CheckTimestamp(index, absl::StrCat(what, " start"), start_ns, limits);
  }
  if (end_ns < limits.lo || end_ns > limits.hi) {
    return CheckTimestamp(index, absl::StrCat(what, " end"), end_ns, limits);
  }
  return absl::OkStatus();
}

inline absl::Status CheckString(uint64_t index, uint32_t name, const DecodedRecords& out) {
  if (name >= out.strings.size()) {
    return Invalid("record ", index, ": string index ", name, " >= string count ",
                   out.strings.size());
  }
  return absl::OkStatus();
}

inline absl::Status TooSmall(uint64_t index, uint16_t kind, uint16_t size, uint16_t min) {
  return Invalid("record ", index, ": size ", size, " is below the minimum of ", min, " for kind ",
                 kind);
}

// Checks the values of record `index` (ranges, string indexes, uniqueness)
// and appends it to `out`. Host kinds in record_reader.cc, GPU kinds in
// record_reader_gpu.cc; ReadRecords dispatches every kind of
// GPUCTL_RECORD_KINDS to its overload.
absl::Status Accept(uint64_t index, const RangeRecord& r, Limits limits, DecodedRecords* out);
absl::Status Accept(uint64_t index, const StepRecord& s, Limits limits, DecodedRecords* out);
absl::Status Accept(uint64_t index, const ThreadNameRecord& t, Limits limits, DecodedRecords* out);
absl::Status Accept(uint64_t index, const KernelRecord& k, Limits limits, DecodedRecords* out);
absl::Status Accept(uint64_t index, const MemcpyRecord& m, Limits limits, DecodedRecords* out);
absl::Status Accept(uint64_t index, const MemsetRecord& m, Limits limits, DecodedRecords* out);
absl::Status Accept(uint64_t index, const ApiCallRecord& a, Limits limits, DecodedRecords* out);
absl::Status Accept(uint64_t index, const SyncRecord& s, Limits limits, DecodedRecords* out);
absl::Status Accept(uint64_t index, const MarkerRecord& m, Limits limits, DecodedRecords* out);
absl::Status Accept(uint64_t index, const OverheadRecord& o, Limits limits, DecodedRecords* out);
absl::Status Accept(uint64_t index, const ExternalCorrelationRecord& e, Limits limits,
                    DecodedRecords* out);
absl::Status Accept(uint64_t index, const DeviceInfoRecord& d, Limits limits, DecodedRecords* out);
absl::Status Accept(uint64_t index, const CaptureInfoRecord& c, Limits limits, DecodedRecords* out);
// record_reader_memory.cc: never an error; bad records are counted.
absl::Status Accept(uint64_t index, const MemoryRecord& m, Limits limits, DecodedRecords* out);
absl::Status Accept(uint64_t index, const MemoryPoolRecord& p, Limits limits, DecodedRecords* out);

}  // namespace gpuctl::daemon::record_decode

#endif  // GPUCTL_DAEMON_CONVERT_RECORD_DECODE_H_
