#ifndef GPUCTL_DAEMON_METRICS_METRICS_OPTIONS_H_
#define GPUCTL_DAEMON_METRICS_METRICS_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpuctl::daemon::metrics {

// metrics.listen / --metrics-listen and metrics.allow_insecure /
// --metrics-allow-insecure.
struct MetricsOptions {
  // "127.0.0.1:9464"; empty: no metrics listener (the default).
  std::string listen;
  // Serve a non-loopback address over plain HTTP.
  bool allow_insecure = false;
};

// Checks a metrics listen address: IPv4 HOST:PORT (the embedded web
// server, civetweb as Debian builds it, has no IPv6), the port 0-65535,
// and a loopback host (127.x, localhost) unless `allow_insecure`, since
// /metrics is plain HTTP without authentication.
absl::Status ValidateMetricsListen(const std::string& address, bool allow_insecure);

// An IPv4 listen address taken apart; "localhost" is 127.0.0.1.
struct MetricsHostPort {
  std::string host;
  uint32_t port = 0;
};
// The shape ValidateMetricsListen checks, without the loopback rule.
absl::StatusOr<MetricsHostPort> SplitMetricsListen(const std::string& address);

}  // namespace gpuctl::daemon::metrics

#endif  // GPUCTL_DAEMON_METRICS_METRICS_OPTIONS_H_
