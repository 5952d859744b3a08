#include "daemon/common/log.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/common/mutex.h"

namespace gpuctl {
namespace {

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};

// A gpuctl::Mutex (constant-initialized, no destructor work) so that
// ThreadSanitizer sees the lock; see docs/testing.md.
ABSL_CONST_INIT Mutex g_sink_mu;
std::function<void(absl::string_view)>* g_sink ABSL_GUARDED_BY(g_sink_mu) = nullptr;

absl::string_view LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

bool NeedsQuotes(absl::string_view value) {
  if (value.empty()) return true;
  for (unsigned char c : value) {
    if (c <= ' ' || c == '=' || c == '"' || c == '\\' || c == 0x7f) return true;
  }
  return false;
}

void AppendValue(std::string* out, absl::string_view value) {
  if (!NeedsQuotes(value)) {
    out->append(value.data(), value.size());
    return;
  }
  out->push_back('"');
  for (unsigned char c : value) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          static constexpr char kHex[] = "0123456789abcdef";
          out->append("\\x");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xf]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

void AppendKey(std::string* out, absl::string_view key) {
  // Keys are code constants; anything that would break the line is dropped.
  for (char c : key) {
    if (c > ' ' && c != '=' && c != '"' && c != 0x7f) out->push_back(c);
  }
}

}  // namespace

void SetMinLogLevel(LogLevel level) { g_min_level.store(static_cast<int>(level)); }

LogLevel MinLogLevel() { return static_cast<LogLevel>(g_min_level.load()); }

bool ParseLogLevel(absl::string_view text, LogLevel* level) {
  if (text == "debug") {
    *level = LogLevel::kDebug;
  } else if (text == "info") {
    *level = LogLevel::kInfo;
  } else if (text == "warning" || text == "warn") {
    *level = LogLevel::kWarning;
  } else if (text == "error") {
    *level = LogLevel::kError;
  } else {
    return false;
  }
  return true;
}

std::string FormatLogLine(absl::Time ts, LogLevel level, absl::string_view msg,
                          std::initializer_list<LogField> fields) {
  std::string line = "ts=";
  line += absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", ts, absl::UTCTimeZone());
  line += " level=";
  absl::StrAppend(&line, LevelName(level));
  line += " msg=";
  // msg is always quoted so that a one-word message reads like the others.
  std::string quoted;
  AppendValue(&quoted, msg);
  if (quoted.empty() || quoted.front() != '"') quoted = absl::StrCat("\"", quoted, "\"");
  line += quoted;
  for (const LogField& field : fields) {
    line.push_back(' ');
    AppendKey(&line, field.key);
    line.push_back('=');
    AppendValue(&line, field.value);
  }
  return line;
}

void Log(LogLevel level, absl::string_view msg, std::initializer_list<LogField> fields) {
  if (static_cast<int>(level) < g_min_level.load(std::memory_order_relaxed)) return;
  std::string line = FormatLogLine(absl::Now(), level, msg, fields);
  MutexLock lock(&g_sink_mu);
  if (g_sink != nullptr) {
    (*g_sink)(line);
    return;
  }
  line.push_back('\n');
  // One write per line keeps lines whole even when other code writes stderr.
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
}

void SetLogSinkForTesting(std::function<void(absl::string_view line)> sink) {
  MutexLock lock(&g_sink_mu);
  delete g_sink;
  g_sink = sink ? new std::function<void(absl::string_view)>(std::move(sink)) : nullptr;
}

}  // namespace gpuctl
