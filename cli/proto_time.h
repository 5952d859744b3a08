#ifndef GPUCTL_CLI_PROTO_TIME_H_
#define GPUCTL_CLI_PROTO_TIME_H_

#include <cstdint>

#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace gpuctl::cli {

inline absl::Time FromProtoTime(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

inline bool IsSet(const google::protobuf::Timestamp& ts) {
  return ts.seconds() != 0 || ts.nanos() != 0;
}

inline void ToProtoTime(absl::Time t, google::protobuf::Timestamp* ts) {
  const int64_t seconds = absl::ToUnixSeconds(t);
  ts->set_seconds(seconds);
  ts->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(seconds))));
}

inline absl::Duration FromProtoDuration(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

// Whole seconds and a nanosecond part of the same sign, as the type wants.
inline void ToProtoDuration(absl::Duration d, google::protobuf::Duration* out) {
  const int64_t seconds = absl::IDivDuration(d, absl::Seconds(1), &d);
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(d)));
}

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_PROTO_TIME_H_
