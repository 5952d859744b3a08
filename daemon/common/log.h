#ifndef GPUCTL_DAEMON_COMMON_LOG_H_
#define GPUCTL_DAEMON_COMMON_LOG_H_

#include <functional>
#include <initializer_list>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gpuctl {

// A structured logger writing one logfmt line per call to stderr:
//   ts=2024-05-01T12:00:00.123Z level=info msg="trace started" trace_id=... pids=2
// Thread-safe; lines from different threads never interleave.

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// One key=value pair. The value is anything absl::StrCat accepts.
struct LogField {
  LogField(absl::string_view k, const absl::AlphaNum& v) : key(k), value(v.Piece()) {}
  absl::string_view key;
  std::string value;
};

void SetMinLogLevel(LogLevel level);
LogLevel MinLogLevel();
// Parses "debug", "info", "warning"/"warn", "error".
bool ParseLogLevel(absl::string_view text, LogLevel* level);

void Log(LogLevel level, absl::string_view msg, std::initializer_list<LogField> fields = {});
inline void LogDebug(absl::string_view msg, std::initializer_list<LogField> fields = {}) {
  Log(LogLevel::kDebug, msg, fields);
}
inline void LogInfo(absl::string_view msg, std::initializer_list<LogField> fields = {}) {
  Log(LogLevel::kInfo, msg, fields);
}
inline void LogWarning(absl::string_view msg, std::initializer_list<LogField> fields = {}) {
  Log(LogLevel::kWarning, msg, fields);
}
inline void LogError(absl::string_view msg, std::initializer_list<LogField> fields = {}) {
  Log(LogLevel::kError, msg, fields);
}

// Formats a line without its trailing newline (exposed for tests).
std::string FormatLogLine(absl::Time ts, LogLevel level, absl::string_view msg,
                          std::initializer_list<LogField> fields);

// Replaces the stderr sink (nullptr restores it). For tests.
void SetLogSinkForTesting(std::function<void(absl::string_view line)> sink);

}  // namespace gpuctl

#endif  // GPUCTL_DAEMON_COMMON_LOG_H_
