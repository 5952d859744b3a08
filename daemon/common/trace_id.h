#ifndef GPUCTL_DAEMON_COMMON_TRACE_ID_H_
#define GPUCTL_DAEMON_COMMON_TRACE_ID_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gpuctl {

// Trace ids are UUIDv7 (RFC 9562) in canonical lowercase text,
// "0190c3a2-7b1e-7c4d-9a2b-3c4d5e6f7a8b": a 48-bit Unix millisecond
// timestamp, version 7, the RFC variant and 74 random bits. Ids therefore
// sort by creation time (to the millisecond) as plain strings.

inline constexpr size_t kTraceIdLength = 36;

// `now` before the epoch or past the 48-bit range is clamped.
std::string GenerateTraceId(absl::Time now, absl::BitGenRef random);

// The id of `time` (clamped likewise) whose 74 random bits come from
// `random` (its version and variant bits are overwritten): an id any host
// derives alike from the same inputs, as scheduled traces need.
std::string FormatTraceId(absl::Time time, const std::array<uint8_t, 10>& random);

// True only for the canonical form above: 36 characters, lowercase hex,
// hyphens at 8, 13, 18 and 23, version nibble 7, variant bits 10. Trace ids
// become directory and object names, so nothing else may pass.
bool IsValidTraceId(absl::string_view id);

// The id's embedded creation time (millisecond precision). INVALID_ARGUMENT
// for an invalid id.
absl::StatusOr<absl::Time> TraceIdTime(absl::string_view id);
// Unix milliseconds embedded in the id; the id must be valid.
int64_t TraceIdUnixMillis(absl::string_view id);

}  // namespace gpuctl

#endif  // GPUCTL_DAEMON_COMMON_TRACE_ID_H_
