#include "daemon/kineto/dyno_rpc_listen.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/excerpt.h"

namespace gpuctl::daemon {

absl::StatusOr<LoopbackAddress> ParseDynoRpcListen(absl::string_view listen) {
  const size_t colon = listen.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", Excerpt(listen), "\" is not HOST:PORT (e.g. 127.0.0.1:1778)"));
  }
  std::string host(listen.substr(0, colon));
  uint32_t port = 0;
  if (!absl::SimpleAtoi(listen.substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", Excerpt(listen), "\": the port must be a number in [0, 65535]"));
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") host = "127.0.0.1";
  LoopbackAddress out;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out.storage);   // NOLINT
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.storage);  // NOLINT
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    if ((ntohl(v4->sin_addr.s_addr) >> 24) == 127) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(static_cast<uint16_t>(port));
      out.size = sizeof(sockaddr_in);
      return out;
    }
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr)) {
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(static_cast<uint16_t>(port));
      out.size = sizeof(sockaddr_in6);
      return out;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", Excerpt(listen),
      "\" is not a loopback address: dynolog's RPC has no authentication, so gpuctld serves it "
      "on 127.0.0.1, ::1 or localhost only"));
}

absl::Status CheckDynoRpcListen(absl::string_view listen) {
  return ParseDynoRpcListen(listen).status();
}

}  // namespace gpuctl::daemon
