#include "daemon/s3/trace_object_key.h"

#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "daemon/common/trace_id.h"
#include "daemon/s3/s3_config.h"
#include "gpuctl/v1/trace_layout.h"

namespace gpuctl::s3 {
namespace {

std::string DayPath(absl::CivilDay day) {
  return absl::StrFormat("%04d/%02d/%02d", day.year(), day.month(), day.day());
}

bool IsTraceFile(absl::string_view file) { return layout::IsTraceFilePath(file); }

absl::CivilDay TraceDay(absl::string_view trace_id) {
  return absl::ToCivilDay(absl::FromUnixMillis(TraceIdUnixMillis(trace_id)), absl::UTCTimeZone());
}

}  // namespace

std::string TraceDayPrefix(absl::string_view prefix, absl::CivilDay day) {
  return absl::StrCat(prefix, prefix.empty() ? "" : "/", DayPath(day), "/");
}

absl::StatusOr<std::string> TraceObjectPrefix(absl::string_view prefix,
                                              absl::string_view trace_id) {
  if (auto st = ValidateKeyPrefix(prefix); !st.ok()) return st;
  if (!IsValidTraceId(trace_id)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid trace id \"", trace_id, "\""));
  }
  return absl::StrCat(TraceDayPrefix(prefix, TraceDay(trace_id)), trace_id, "/");
}

absl::StatusOr<std::string> TraceObjectKey(absl::string_view prefix, absl::string_view trace_id,
                                           absl::string_view file) {
  if (!IsTraceFile(file)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid file name \"", file, "\""));
  }
  auto dir = TraceObjectPrefix(prefix, trace_id);
  if (!dir.ok()) return dir.status();
  return absl::StrCat(*dir, file);
}

std::optional<TraceObjectName> ParseTraceObjectKey(absl::string_view prefix,
                                                   absl::string_view key) {
  if (!prefix.empty()) {
    if (key.size() <= prefix.size() || key.substr(0, prefix.size()) != prefix ||
        key[prefix.size()] != '/') {
      return std::nullopt;
    }
    key.remove_prefix(prefix.size() + 1);
  }
  // <yyyy>/<mm>/<dd>/<trace-id>/<file>, where <file> may be a manifest
  // path ("_gpuctl/<host>.json"), the one file name with a slash.
  std::vector<absl::string_view> parts = absl::StrSplit(key, absl::MaxSplits('/', 4));
  if (parts.size() != 5 || !IsValidTraceId(parts[3]) || !IsTraceFile(parts[4])) {
    return std::nullopt;
  }
  if (absl::StrCat(parts[0], "/", parts[1], "/", parts[2]) != DayPath(TraceDay(parts[3]))) {
    return std::nullopt;
  }
  return TraceObjectName{std::string(parts[3]), std::string(parts[4])};
}

}  // namespace gpuctl::s3
