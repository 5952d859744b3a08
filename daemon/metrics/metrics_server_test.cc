#include "daemon/metrics/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/metrics/daemon_metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

int PortOf(const std::string& address) {
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port)) << address;
  return port;
}

// One HTTP/1.0 request to 127.0.0.1:port; the whole response.
std::string Get(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  if (connect(fd, sa, sizeof(addr)) != 0) {
    close(fd);
    return "connect failed";
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: x\r\n\r\n");
  EXPECT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) response.append(buf, n);
  close(fd);
  return response;
}

TEST(MetricsServerTest, ServesTheRegistryInTheTextFormatOnTheChosenPort) {
  DaemonMetrics metrics("9.9.9", {});
  metrics.OnHelloAccepted();
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::Start({.listen = "127.0.0.1:0"}, {metrics.registry()});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->address(), StartsWith("127.0.0.1:"));
  const int port = PortOf((*server)->address());
  ASSERT_GT(port, 0);
  const std::string response = Get(port, "/metrics");
  EXPECT_THAT(response, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(response, HasSubstr("Content-Type: text/plain"));
  EXPECT_THAT(response, HasSubstr("gpuctld_registrations_total 1"));
  EXPECT_THAT(Get(port, "/"), HasSubstr(" 404 Not Found"));
}

TEST(MetricsServerTest, StoppingClosesTheListener) {
  DaemonMetrics metrics("9.9.9", {});
  auto server = MetricsServer::Start({.listen = "localhost:0"}, {metrics.registry()});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = PortOf((*server)->address());
  server->reset();
  EXPECT_EQ(Get(port, "/metrics"), "connect failed");
}

TEST(MetricsServerTest, AnAddressInUseIsUnavailableNamingIt) {
  DaemonMetrics metrics("9.9.9", {});
  auto first = MetricsServer::Start({.listen = "127.0.0.1:0"}, {metrics.registry()});
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = MetricsServer::Start({.listen = (*first)->address()}, {metrics.registry()});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr((*first)->address()));
}

TEST(MetricsServerTest, NonLoopbackNeedsTheOptIn) {
  absl::Status refused = ValidateMetricsListen("0.0.0.0:9464", false);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("metrics.allow_insecure"));
  EXPECT_TRUE(ValidateMetricsListen("0.0.0.0:9464", true).ok());
  EXPECT_TRUE(ValidateMetricsListen("127.0.0.2:9464", false).ok());
  EXPECT_TRUE(ValidateMetricsListen("localhost:9464", false).ok());
  DaemonMetrics metrics("9.9.9", {});
  EXPECT_FALSE(MetricsServer::Start({.listen = "10.1.2.3:0"}, {metrics.registry()}).ok());
  auto opted_in =
      MetricsServer::Start({.listen = "0.0.0.0:0", .allow_insecure = true}, {metrics.registry()});
  ASSERT_TRUE(opted_in.ok()) << opted_in.status();
  EXPECT_THAT(Get(PortOf((*opted_in)->address()), "/metrics"), StartsWith("HTTP/1.1 200"));
}

TEST(MetricsServerTest, MalformedAddressesAreRefusedWithTheReason) {
  for (const char* bad : {"", "9464", ":9464", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:x",
                          "host.example:9464", "[::1]:9464", "unix:/run/x.sock"}) {
    absl::Status s = ValidateMetricsListen(bad, true);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("invalid metrics listen address")) << bad;
  }
  EXPECT_THAT(ValidateMetricsListen("[::1]:9464", true).message(), HasSubstr("IPv6"));
}

}  // namespace
}  // namespace gpuctl::daemon::metrics
