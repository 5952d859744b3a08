#ifndef GPUCTL_CLI_DURATION_H_
#define GPUCTL_CLI_DURATION_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gpuctl::cli {

// The longest duration ParseUserDuration accepts; anything longer is a typo
// for a profiling window or a timeout.
inline constexpr absl::Duration kMaxUserDuration = absl::Hours(24);

// Parses a duration as people write it on a command line: one or more
// <number><unit> terms, units h, m, s, ms, us, ns ("5s", "500ms", "2m",
// "1m30s", "1.5s", "100us"). Stricter than absl::ParseDuration: a unit is
// required (no bare "0" or "5"), no sign, no "inf", no spaces, the result
// must be positive and at most kMaxUserDuration. Errors are
// INVALID_ARGUMENT with a message naming the input and the fix. With
// `allow_zero`, a zero duration ("0s", "0ms") is accepted too.
absl::StatusOr<absl::Duration> ParseUserDuration(absl::string_view text, bool allow_zero = false);

// The longest look back ParseLookback accepts: as far as a bucket listing
// goes (ListTracesRequest.bucket_days).
inline constexpr absl::Duration kMaxLookback = absl::Hours(24 * 366);

// A look back into stored traces (`gpuctl analyze --since`): the grammar of
// ParseUserDuration plus days ("7d", "1d12h"), positive and at most
// kMaxLookback.
absl::StatusOr<absl::Duration> ParseLookback(absl::string_view text);

// The compact form used in output ("5s", "1m30s", "500ms").
std::string FormatUserDuration(absl::Duration d);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_DURATION_H_
