#ifndef GPUCTL_DAEMON_CORE_PROTO_TIME_H_
#define GPUCTL_DAEMON_CORE_PROTO_TIME_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace gpuctl::daemon {

google::protobuf::Timestamp ToProtoTimestamp(absl::Time t);
// INVALID_ARGUMENT naming `field` for a malformed Timestamp (nanos out of
// range) or one before 1970 or after 9999 (outside what the daemon sends
// on as Unix nanoseconds).
absl::StatusOr<absl::Time> FromProtoTimestamp(const google::protobuf::Timestamp& t,
                                              absl::string_view field);
google::protobuf::Timestamp TimestampFromUnixNanos(int64_t ns);
google::protobuf::Duration ToProtoDuration(absl::Duration d);
// INVALID_ARGUMENT for a malformed Duration (nanos out of range or with a
// sign other than the seconds').
absl::StatusOr<absl::Duration> FromProtoDuration(const google::protobuf::Duration& d);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_PROTO_TIME_H_
