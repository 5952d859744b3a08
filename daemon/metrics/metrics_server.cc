#include "daemon/metrics/metrics_server.h"

#include <arpa/inet.h>

#include <exception>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"

namespace gpuctl::daemon::metrics {
namespace {

constexpr int kServerThreads = 2;

struct HostPort {
  std::string host;
  uint32_t port = 0;
};

absl::StatusOr<HostPort> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError("expected HOST:PORT, like 127.0.0.1:9464");
  }
  HostPort out{address.substr(0, colon), 0};
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

}  // namespace

absl::Status ValidateMetricsListen(const std::string& address, bool allow_insecure) {
  absl::StatusOr<HostPort> parts = SplitHostPort(address);
  if (!parts.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid metrics listen address \"", address, "\": ", parts.status().message()));
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

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const MetricsOptions& options, std::vector<std::shared_ptr<prometheus::Collectable>> sources) {
  if (absl::Status s = ValidateMetricsListen(options.listen, options.allow_insecure); !s.ok()) {
    return s;
  }
  const HostPort parts = *SplitHostPort(options.listen);
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
