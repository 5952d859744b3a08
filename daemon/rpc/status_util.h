#ifndef GPUCTL_DAEMON_RPC_STATUS_UTIL_H_
#define GPUCTL_DAEMON_RPC_STATUS_UTIL_H_

#include "absl/status/status.h"
#include "daemon/common/excerpt.h"
#include "grpcpp/support/status.h"

namespace gpuctl::daemon {

// The one place absl::Status becomes grpc::Status. The canonical codes are
// shared, so the code is kept; the message is carried cut to
// kMaxStatusMessageBytes, so that it fits in any client's metadata limit.
inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  int code = static_cast<int>(status.code());
  if (code < 0 || code > static_cast<int>(grpc::StatusCode::UNAUTHENTICATED)) {
    code = static_cast<int>(grpc::StatusCode::UNKNOWN);
  }
  return grpc::Status(static_cast<grpc::StatusCode>(code), ClampMessage(status.message()));
}

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_RPC_STATUS_UTIL_H_
