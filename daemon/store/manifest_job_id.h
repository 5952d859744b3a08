#ifndef GPUCTL_DAEMON_STORE_MANIFEST_JOB_ID_H_
#define GPUCTL_DAEMON_STORE_MANIFEST_JOB_ID_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuctl::daemon {

// Containers nested inside a manifest's top-level object that ManifestJobId
// follows before refusing the text.
inline constexpr int kMaxManifestJsonDepth = 100;

// The top-level job id of a manifest.json (protobuf JSON mapping, "job_id"
// or "jobId"; empty when absent or null), read in one streaming pass that
// stops at that key: what indexing needs, without parsing the rest into
// messages. Nested objects (the results' own job ids) are skipped.
// INVALID_ARGUMENT when the text is not a JSON object up to that key, or
// the key's value is not a string.
absl::StatusOr<std::string> ManifestJobId(absl::string_view json);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_STORE_MANIFEST_JOB_ID_H_
