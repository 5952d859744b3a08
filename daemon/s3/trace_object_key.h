#ifndef GPUCTL_DAEMON_S3_TRACE_OBJECT_KEY_H_
#define GPUCTL_DAEMON_S3_TRACE_OBJECT_KEY_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"

namespace gpuctl::s3 {

// Where a trace's files live in a bucket:
//
//   <prefix>/<yyyy>/<mm>/<dd>/<trace-id>/<file>
//
// The date is the UTC day of the trace id's UUIDv7 timestamp, so a day's
// traces share a prefix and keys sort by time; with an empty prefix the key
// starts at <yyyy>. Trace ids must pass IsValidTraceId and the prefix
// ValidateKeyPrefix. <file> is a trace's file as gpuctl/v1/trace_layout.h
// names it (layout::IsTraceFilePath): a file name of [A-Za-z0-9._-]{1,255}
// without a leading dot (as the local store's), or a host's manifest
// "_gpuctl/<host>.json", the only <file> with a slash. Each host of a trace
// has its own manifest key; buckets written before had one
// ".../<trace-id>/manifest.json" (layout::kLegacyManifestName), still a
// valid <file>.

absl::StatusOr<std::string> TraceObjectKey(absl::string_view prefix, absl::string_view trace_id,
                                           absl::string_view file);

// "<prefix>/<yyyy>/<mm>/<dd>/<trace-id>/": the prefix that lists one trace's
// files.
absl::StatusOr<std::string> TraceObjectPrefix(absl::string_view prefix, absl::string_view trace_id);

// "<prefix>/<yyyy>/<mm>/<dd>/": the prefix that lists one day's traces
// (with delimiter "/"). The prefix must be valid.
std::string TraceDayPrefix(absl::string_view prefix, absl::CivilDay day);

struct TraceObjectName {
  std::string trace_id;
  std::string file;
};

// The inverse of TraceObjectKey: nullopt for a key outside the layout,
// including one whose date does not match its trace id.
std::optional<TraceObjectName> ParseTraceObjectKey(absl::string_view prefix, absl::string_view key);

}  // namespace gpuctl::s3

#endif  // GPUCTL_DAEMON_S3_TRACE_OBJECT_KEY_H_
