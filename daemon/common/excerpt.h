#ifndef GPUCTL_DAEMON_COMMON_EXCERPT_H_
#define GPUCTL_DAEMON_COMMON_EXCERPT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace gpuctl {

// How much of a rejected value an error message quotes by default.
inline constexpr size_t kExcerptBytes = 64;
// The longest status message the daemon returns to a client.
inline constexpr size_t kMaxStatusMessageBytes = 1000;

// What an error message quotes of a value it rejects: `text` itself when it
// has at most `max_bytes` bytes, else its longest prefix of at most
// `max_bytes` bytes that ends on a UTF-8 character boundary, followed by
// "... (N bytes)" with the original's size. The result has at most
// max_bytes + 32 bytes.
std::string Excerpt(absl::string_view text, size_t max_bytes = kExcerptBytes);

// `message` cut on a UTF-8 character boundary to at most `max_bytes`
// bytes, its end saying so ("... (N bytes)", which counts in the bound
// when max_bytes has room for it).
std::string ClampMessage(absl::string_view message, size_t max_bytes = kMaxStatusMessageBytes);

}  // namespace gpuctl

#endif  // GPUCTL_DAEMON_COMMON_EXCERPT_H_
