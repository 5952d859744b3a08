// A minimal ConvertKinetoTrace: checks the outline of a kineto trace
// (a JSON object with traceEvents), counts its events by category and
// compresses it unchanged. The full validator replaces this file.
#include "daemon/convert/kineto_trace.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "daemon/convert/gzip.h"

namespace gpuctl::daemon {
namespace {

uint64_t Count(absl::string_view text, absl::string_view needle) {
  uint64_t n = 0;
  for (size_t at = text.find(needle); at != absl::string_view::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

}  // namespace

absl::StatusOr<KinetoConverted> ConvertKinetoTrace(absl::string_view json,
                                                   const KinetoTraceTag& tag, int gzip_level) {
  size_t first = json.find_first_not_of(" \t\r\n");
  if (first == absl::string_view::npos || json[first] != '{') {
    return absl::InvalidArgumentError(
        absl::StrCat("not a kineto trace: no JSON object at byte offset ",
                     first == absl::string_view::npos ? json.size() : first));
  }
  size_t last = json.find_last_not_of(" \t\r\n");
  if (json[last] != '}') {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON: the object does not end at byte offset ", last));
  }
  if (json.find("\"traceEvents\"") == absl::string_view::npos) {
    return absl::InvalidArgumentError("not a kineto trace: no traceEvents at byte offset 0");
  }
  KinetoConverted out;
  out.summary.cpu_op_count = Count(json, "\"cat\": \"cpu_op\"");
  out.summary.kernel_count = Count(json, "\"cat\": \"kernel\"");
  out.summary.event_count = Count(json, "\"ph\"");
  out.summary.trace_id_in_file = tag.trace_id;
  absl::StatusOr<std::string> gzip = GzipCompress(json, gzip_level);
  if (!gzip.ok()) return gzip.status();
  out.gzip = *std::move(gzip);
  return out;
}

}  // namespace gpuctl::daemon
