#include "daemon/metrics/metrics_server.h"

#include <exception>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"

namespace gpuctl::daemon::metrics {
namespace {

constexpr int kServerThreads = 2;

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const MetricsOptions& options, std::vector<std::shared_ptr<prometheus::Collectable>> sources) {
  if (absl::Status s = ValidateMetricsListen(options.listen, options.allow_insecure); !s.ok()) {
    return s;
  }
  const MetricsHostPort parts = *SplitMetricsListen(options.listen);
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->sources_ = std::move(sources);
  const std::string bind = absl::StrCat(parts.host, ":", parts.port);
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", bind, "num_threads", std::to_string(kServerThreads),
        // Only what the scrape needs: no directory listing, no files.
        "enable_directory_listing", "no"});
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", options.listen, ": ",
                                               e.what(),
                                               " (is the address in use or not on this host?)"));
  }
  const std::vector<int> ports = server->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", options.listen));
  }
  server->address_ = absl::StrCat(parts.host, ":", ports.front());
  for (const auto& source : server->sources_) server->exposer_->RegisterCollectable(source);
  return server;
}

MetricsServer::~MetricsServer() { exposer_.reset(); }

}  // namespace gpuctl::daemon::metrics
