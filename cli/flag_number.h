#ifndef GPUCTL_CLI_FLAG_NUMBER_H_
#define GPUCTL_CLI_FLAG_NUMBER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuctl::cli {

// Parses the value typed for a numeric flag: decimal digits only (no sign,
// no spaces, no "0x"), from `min` to `max`. `what` says what the number
// counts ("a process id"); the error, INVALID_ARGUMENT, says it in words
// with the range and quotes what was typed:
//   --pid: expected a process id, a positive integer, got "abc"
absl::StatusOr<uint64_t> ParseFlagNumber(absl::string_view flag, absl::string_view text,
                                         absl::string_view what, uint64_t min, uint64_t max);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_FLAG_NUMBER_H_
