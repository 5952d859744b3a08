#ifndef GPUCTL_DAEMON_RUNTIME_PROTOBUF_LOG_H_
#define GPUCTL_DAEMON_RUNTIME_PROTOBUF_LOG_H_

namespace gpuctl::daemon {

// Sends libprotobuf's own log lines (a string field that is not UTF-8, a
// message it cannot serialize) to the daemon's structured log instead of
// stderr as "[libprotobuf ERROR ...]". Process-wide: the wiring calls it
// once, first.
void RouteProtobufLogs();

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_RUNTIME_PROTOBUF_LOG_H_
