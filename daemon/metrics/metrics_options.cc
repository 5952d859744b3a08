#include "daemon/metrics/metrics_options.h"

#include <arpa/inet.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gpuctl::daemon::metrics {

absl::StatusOr<MetricsHostPort> SplitMetricsListen(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError("expected HOST:PORT, like 127.0.0.1:9464");
  }
  MetricsHostPort out{address.substr(0, colon), 0};
  if (out.host.front() == '[' || out.host.find(':') != std::string::npos) {
    return absl::InvalidArgumentError(
        "IPv6 is not available (the embedded web server is built without it): use an IPv4 "
        "address");
  }
  if (!absl::SimpleAtoi(address.substr(colon + 1), &out.port) || out.port > 65535) {
    return absl::InvalidArgumentError("port must be 0-65535");
  }
  if (out.host == "localhost") out.host = "127.0.0.1";
  in_addr parsed{};
  if (inet_pton(AF_INET, out.host.c_str(), &parsed) != 1) {
    return absl::InvalidArgumentError("the host must be an IPv4 address or localhost");
  }
  return out;
}

absl::Status ValidateMetricsListen(const std::string& address, bool allow_insecure) {
  absl::StatusOr<MetricsHostPort> parts = SplitMetricsListen(address);
  if (!parts.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("invalid metrics listen address \"", address,
                                                   "\": ", parts.status().message()));
  }
  if (parts->host.rfind("127.", 0) != 0 && !allow_insecure) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refusing to serve metrics on ", address,
        ": /metrics is plain HTTP without authentication; listen on a loopback address, or "
        "set metrics.allow_insecure: true (--metrics-allow-insecure) and restrict who can reach "
        "the port (docs/metrics.md)"));
  }
  return absl::OkStatus();
}

}  // namespace gpuctl::daemon::metrics
