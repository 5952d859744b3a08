// Internal to the record reader: explicit little-endian loads and the
// checks shared by the host and GPU record decoders. Not a public API.
#ifndef GPUCTL_DAEMON_CONVERT_RECORD_DECODE_H_
#define GPUCTL_DAEMON_CONVERT_RECORD_DECODE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/convert/record_reader.h"

namespace gpuctl::daemon::record_decode {

// `p` must have the bytes; callers check sizes first.
inline uint16_t Load16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t Load32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
inline uint64_t Load64(const uint8_t* p) {
  return static_cast<uint64_t>(Load32(p)) | (static_cast<uint64_t>(Load32(p + 4)) << 32);
}
inline int64_t LoadI64(const uint8_t* p) { return static_cast<int64_t>(Load64(p)); }
inline int32_t LoadI32(const uint8_t* p) { return static_cast<int32_t>(Load32(p)); }

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

// start <= end, both inside the limits.
inline absl::Status CheckInterval(uint64_t index, absl::string_view what, int64_t start_ns,
                                  int64_t end_ns, Limits limits) {
  if (end_ns < start_ns) {
    return Invalid("record ", index, ": ", what, " ends at ", end_ns, " ns before it starts at ",
                   start_ns, " ns");
  }
  if (auto st = CheckTimestamp(index, absl::StrCat(what, " start"), start_ns, limits); !st.ok()) {
    return st;
  }
  return CheckTimestamp(index, absl::StrCat(what, " end"), end_ns, limits);
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

// Decodes one record of a GPU kind (records.h, minor 1) into `out`. Sets
// *known to false (and returns OK) for a kind it does not handle.
absl::Status ReadGpuRecord(uint64_t index, uint16_t kind, const uint8_t* p, uint16_t size,
                           Limits limits, DecodedRecords* out, bool* known);

}  // namespace gpuctl::daemon::record_decode

#endif  // GPUCTL_DAEMON_CONVERT_RECORD_DECODE_H_
