#ifndef GPUCTL_DAEMON_METRICS_METRICS_SERVER_H_
#define GPUCTL_DAEMON_METRICS_METRICS_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/metrics/metrics_options.h"
#include "prometheus/collectable.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace gpuctl::daemon::metrics {

// Serves GET /metrics in the Prometheus text format on its own listener
// (prometheus-cpp's Exposer: civetweb, two threads), from the collectables
// given. Nothing of it runs unless started.
class MetricsServer {
 public:
  // Binds `options.listen` (validated again) and serves until destroyed.
  // UNAVAILABLE naming the address when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const MetricsOptions& options, std::vector<std::shared_ptr<prometheus::Collectable>> sources);
  // Stops serving; a scrape in progress finishes first.
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // "127.0.0.1:41234": the bound address (the port chosen for port 0).
  const std::string& address() const { return address_; }

 private:
  MetricsServer() = default;

  std::vector<std::shared_ptr<prometheus::Collectable>> sources_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string address_;
};

}  // namespace gpuctl::daemon::metrics

#endif  // GPUCTL_DAEMON_METRICS_METRICS_SERVER_H_
