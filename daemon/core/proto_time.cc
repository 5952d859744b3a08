#include "daemon/core/proto_time.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpuctl::daemon {
namespace {
constexpr int64_t kNanosPerSecond = 1000000000;
}  // namespace

google::protobuf::Timestamp ToProtoTimestamp(absl::Time t) {
  return TimestampFromUnixNanos(absl::ToUnixNanos(t));
}

absl::StatusOr<absl::Time> FromProtoTimestamp(const google::protobuf::Timestamp& t,
                                              absl::string_view field) {
  // 9999-12-31T23:59:59Z, the largest Timestamp protobuf allows.
  constexpr int64_t kMaxSeconds = 253402300799;
  if (t.nanos() < 0 || t.nanos() >= kNanosPerSecond || t.seconds() < 0 ||
      t.seconds() > kMaxSeconds) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is not a valid instant (", t.seconds(),
                                                   "s, ", t.nanos(), "ns since 1970)"));
  }
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

google::protobuf::Timestamp TimestampFromUnixNanos(int64_t ns) {
  int64_t seconds = ns / kNanosPerSecond;
  int64_t nanos = ns % kNanosPerSecond;
  if (nanos < 0) {
    --seconds;
    nanos += kNanosPerSecond;
  }
  google::protobuf::Timestamp ts;
  ts.set_seconds(seconds);
  ts.set_nanos(static_cast<int32_t>(nanos));
  return ts;
}

google::protobuf::Duration ToProtoDuration(absl::Duration d) {
  google::protobuf::Duration out;
  int64_t seconds = absl::IDivDuration(d, absl::Seconds(1), &d);
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(d)));
  return out;
}

absl::StatusOr<absl::Duration> FromProtoDuration(const google::protobuf::Duration& d) {
  if (d.nanos() <= -kNanosPerSecond || d.nanos() >= kNanosPerSecond ||
      (d.seconds() > 0 && d.nanos() < 0) || (d.seconds() < 0 && d.nanos() > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed duration (", d.seconds(), "s, ", d.nanos(), "ns)"));
  }
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

}  // namespace gpuctl::daemon
