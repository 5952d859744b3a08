#ifndef GPUCTL_DAEMON_CONVERT_JSON_WRITER_H_
#define GPUCTL_DAEMON_CONVERT_JSON_WRITER_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace gpuctl::daemon {

// Appends `s` as a JSON string literal (quotes included). Quotes,
// backslashes and control characters are escaped; bytes that are not valid
// UTF-8 (bad sequences, overlongs, surrogates, > U+10FFFF) become \ufffd, so
// the output is valid JSON whatever the input.
void AppendJsonString(std::string* out, absl::string_view s);

// `s` with every byte that is not part of valid UTF-8 replaced by U+FFFD,
// for strings that go into protobuf string fields.
std::string RepairUtf8(absl::string_view s);

// Appends a nanosecond quantity as microseconds with a nanosecond fraction,
// the way kineto writes ts/dur: 1234567 -> "1234.567", -1500 -> "-1.500".
// Locale-independent.
void AppendMicrosFromNanos(std::string* out, int64_t ns);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CONVERT_JSON_WRITER_H_
