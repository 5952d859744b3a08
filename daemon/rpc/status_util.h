#ifndef GPUCTL_DAEMON_RPC_STATUS_UTIL_H_
#define GPUCTL_DAEMON_RPC_STATUS_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace gpuctl::daemon {

// The one place absl::Status becomes grpc::Status. The canonical codes are
// shared, so the code is kept and the message carried as is.
inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  int code = static_cast<int>(status.code());
  if (code < 0 || code > static_cast<int>(grpc::StatusCode::UNAUTHENTICATED)) {
    code = static_cast<int>(grpc::StatusCode::UNKNOWN);
  }
  return grpc::Status(static_cast<grpc::StatusCode>(code), std::string(status.message()));
}

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_RPC_STATUS_UTIL_H_
