#ifndef GPUCTL_DAEMON_CONFIG_CONFIG_VALUES_H_
#define GPUCTL_DAEMON_CONFIG_CONFIG_VALUES_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

// The value syntaxes of gpuctld's configuration file (and of the flags that
// share them). Errors are INVALID_ARGUMENT and quote the text; the caller
// prefixes the key or flag they came from.
namespace gpuctl::daemon {

// The longest duration accepted anywhere in the configuration.
inline constexpr absl::Duration kMaxConfigDuration = absl::Hours(24 * 36500);

// A whole number and one unit: "100ms", "10s", "10m", "2h", "30d"; "0" alone
// is zero. No signs, fractions, spaces or compound forms ("1h30m").
absl::StatusOr<absl::Duration> ParseConfigDuration(absl::string_view text);

// Plain bytes ("1048576") or a whole number and a unit: KiB, MiB, GiB, TiB
// (powers of 1024) or KB, MB, GB, TB (powers of 1000). No signs, fractions
// or spaces.
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

// A plain non-negative decimal number ("100000").
absl::StatusOr<uint64_t> ParseConfigCount(absl::string_view text);

// The shortest exact form ParseByteSize reads back: "256MiB", "50GB", "1000".
std::string FormatByteSize(uint64_t bytes);

// The shortest exact form ParseConfigDuration reads back: "30d", "100ms".
// Sub-millisecond parts are dropped.
std::string FormatConfigDuration(absl::Duration d);

// The longest host name gpuctld may be given (a DNS name's limit).
inline constexpr size_t kMaxHostNameBytes = 253;

// A host name the daemon calls itself by (host_name, --host-name): 1 to
// kMaxHostNameBytes of letters, digits, '.', '-' and '_', starting with a
// letter or digit, so that it reads the same in listings, trace file names
// and object keys.
absl::Status CheckHostName(absl::string_view name);

// `text` quoted for an error message: escaped, and cut after 64 bytes.
std::string QuoteConfigText(absl::string_view text);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CONFIG_CONFIG_VALUES_H_
