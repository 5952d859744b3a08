#ifndef GPUCTL_DAEMON_S3_REMOTE_LISTING_H_
#define GPUCTL_DAEMON_S3_REMOTE_LISTING_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "daemon/s3/s3_client.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::s3 {

// Listing the traces in the bucket, every daemon's: a fleet's daemons
// share one bucket, and a sidecar's traces outlive its pod there. Traces
// are found day by day under <prefix>/<yyyy>/<mm>/<dd>/ (trace_object_key.h),
// newest first, and each is described by one host's manifest
// (ReadRemoteManifest: `preferred`, this host's, when the trace has one).

// Days a listing goes back, today (UTC) included, when the request says 0.
inline constexpr uint32_t kDefaultBucketDays = 7;
inline constexpr uint32_t kMaxBucketDays = 366;

// The trace ids of one day in the bucket, newest first: the common
// prefixes under that day's prefix (delimiter "/"), page by page; keys that
// are not a trace's directory are passed over.
absl::StatusOr<std::vector<std::string>> ListBucketDay(S3Client& client, absl::CivilDay day);

// One page of the bucket's traces for ListTraces with `bucket` set: newest
// first from today (UTC, at `now`) back `bucket_days` days, after
// `page_token` (the last trace id of the previous page), filtered by job id
// and trigger kind as the local store filters. next_page_token is set
// when the page is full (the next one may be empty). A trace whose
// manifest cannot be read is skipped and logged; an error listing the
// bucket fails the call.
absl::StatusOr<v1::ListTracesResponse> ListBucketTraces(S3Client& client,
                                                        const v1::ListTracesRequest& request,
                                                        absl::string_view preferred,
                                                        absl::Time now);

}  // namespace gpuctl::s3

#endif  // GPUCTL_DAEMON_S3_REMOTE_LISTING_H_
