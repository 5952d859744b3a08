#ifndef GPUCTL_DAEMON_ANALYSIS_MICROS_TEXT_H_
#define GPUCTL_DAEMON_ANALYSIS_MICROS_TEXT_H_

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace gpuctl::analysis {

// µs as a trace writes them ("251234.567", "12", "-1.5", "1.5e3") to ns:
// exact for up to three decimals (more round half up), exponents through a
// double. nullopt for text that is not a number or whose magnitude exceeds
// `max_micros` (which must keep max_micros * 1000 within int64).
std::optional<int64_t> MicrosTextToNanos(absl::string_view text, double max_micros);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_MICROS_TEXT_H_
