#ifndef GPUCTL_DAEMON_S3_REMOTE_TRACE_H_
#define GPUCTL_DAEMON_S3_REMOTE_TRACE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/s3/s3_client.h"
#include "gpuctl/v1/manifest.pb.h"

namespace gpuctl::s3 {

// Reading a trace from the bucket alone, for a daemon whose spool does not
// know it: one uploaded by another daemon sharing the bucket, or by a pod
// whose spool died with it. The trace's prefix follows from its id
// (trace_object_key.h); its manifests are the objects
// <trace prefix>/_gpuctl/<host>.json (gpuctl/v1/trace_layout.h), or the
// legacy <trace prefix>/manifest.json of older buckets.

// The trace's manifests in the bucket as trace file paths,
// "_gpuctl/<host>.json", in key order: ListObjectsV2 under
// <trace prefix>/_gpuctl/, page by page. INVALID_ARGUMENT for an id that
// is not a trace id.
absl::StatusOr<std::vector<std::string>> ListRemoteManifests(S3Client& client,
                                                             absl::string_view trace_id);

// The manifest GetTrace serves from the bucket: `preferred` (this host's
// "_gpuctl/<host>.json") when the bucket has it, else the first one listed,
// else the legacy manifest.json. NOT_FOUND when the bucket holds none;
// DATA_LOSS when the one read does not parse or names another trace.
absl::StatusOr<v1::TraceManifest> ReadRemoteManifest(S3Client& client, absl::string_view trace_id,
                                                     absl::string_view preferred);

// Every manifest of the trace in the bucket, each with the trace file path
// it is stored under ("_gpuctl/<host>.json", or "manifest.json" for a trace
// of the legacy layout), in key order: every host's part of a fan-out
// trace. NOT_FOUND when the bucket holds none; DATA_LOSS when one does not
// parse or names another trace.
absl::StatusOr<std::vector<std::pair<std::string, v1::TraceManifest>>> ReadRemoteManifests(
    S3Client& client, absl::string_view trace_id);

}  // namespace gpuctl::s3

#endif  // GPUCTL_DAEMON_S3_REMOTE_TRACE_H_
