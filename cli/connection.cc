#include "cli/connection.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/exit_codes.h"
#include "cli/format.h"
#include "gpuctl/v1/service.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_interceptor.h"

namespace gpuctl::cli {
namespace {

constexpr absl::string_view kRpcErrorPayload = "type.gpuctl.dev/cli.RpcError";

bool ValidPort(absl::string_view port) {
  int value = 0;
  return !port.empty() && absl::SimpleAtoi(port, &value) && value > 0 && value <= 65535 &&
         port.find_first_not_of("0123456789") == absl::string_view::npos;
}

std::chrono::system_clock::time_point ToChrono(absl::Time t) { return absl::ToChronoTime(t); }

// Adds the bearer token to every call of a channel.
class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;
};

class BearerTokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(const std::string& token)
      : header_(absl::StrCat("Bearer ", token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerTokenInterceptor(&header_);
  }

 private:
  const std::string header_;
};

std::shared_ptr<grpc::Channel> OpenChannel(const std::string& target, grpc::ChannelArguments args,
                                           const ChannelSecurity& security) {
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      security.credentials != nullptr ? security.credentials : grpc::InsecureChannelCredentials();
  if (!security.server_name.empty()) args.SetSslTargetNameOverride(security.server_name);
  if (security.token.empty()) return grpc::CreateCustomChannel(target, credentials, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<BearerTokenInterceptorFactory>(security.token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, credentials, args,
                                                                 std::move(factories));
}

// What a connection that reached the host and then failed suggests: a
// peer that closed it or a failed handshake hints at a TLS mismatch.
std::string SecurityHint(const std::string& reason, const ChannelSecurity& security) {
  bool handshake_like = false;
  for (absl::string_view sign :
       {"Socket closed", "Connection reset", "andshake", "SSL", "certificate", "EOF"}) {
    handshake_like = handshake_like || absl::StrContains(reason, sign);
  }
  if (!handshake_like) return "";
  if (security.tls) {
    return " (TLS handshake failed? check --tls-ca, --tls-cert/--tls-key and --tls-server-name, "
           "and that gpuctld serves TLS)";
  }
  return " (gpuctld may require TLS: pass --tls or --tls-ca)";
}

}  // namespace

absl::StatusOr<std::string> NormalizeHost(absl::string_view host) {
  if (host.empty()) return absl::InvalidArgumentError("empty host");
  if (absl::StrContains(host, ":/") || absl::StartsWith(host, "unix:")) return std::string(host);
  auto bad_port = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid host \"", Printable(host), "\": expected HOST or HOST:PORT"));
  };
  if (host[0] == '[') {
    size_t close = host.find(']');
    if (close == absl::string_view::npos || close == 1) return bad_port();
    absl::string_view rest = host.substr(close + 1);
    if (rest.empty()) return absl::StrCat(host, ":", kDefaultPort);
    if (rest[0] != ':' || !ValidPort(rest.substr(1))) return bad_port();
    return std::string(host);
  }
  size_t colons = std::count(host.begin(), host.end(), ':');
  if (colons == 0) return absl::StrCat(host, ":", kDefaultPort);
  if (colons > 1) return absl::StrCat("[", host, "]:", kDefaultPort);
  size_t colon = host.find(':');
  if (colon == 0 || !ValidPort(host.substr(colon + 1))) return bad_port();
  return std::string(host);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(const std::string& target,
                                                       absl::Duration timeout,
                                                       const std::atomic<bool>* cancelled,
                                                       const ChannelSecurity& security) {
  grpc::ChannelArguments args;
  // Bounds a single connection attempt so a silent host fails within the
  // timeout rather than gRPC's 20 s default.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
              static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout))));
  std::shared_ptr<grpc::Channel> channel = OpenChannel(target, std::move(args), security);
  const absl::Time deadline = absl::Now() + timeout;
  auto is_cancelled = [&] { return cancelled != nullptr && cancelled->load(); };
  grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY && !is_cancelled()) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) break;
    // gRPC cannot interrupt this wait; with a cancellation flag it is
    // sliced so that Ctrl-C is honoured promptly.
    absl::Time wake =
        cancelled == nullptr ? deadline : std::min(deadline, absl::Now() + kConnectCancelLatency);
    if (!channel->WaitForStateChange(state, ToChrono(wake))) {
      if (wake >= deadline) break;
      continue;
    }
    state = channel->GetState(/*try_to_connect=*/true);
  }
  if (is_cancelled()) return absl::CancelledError("cancelled before the connection was made");
  if (state == GRPC_CHANNEL_READY) return channel;
  std::string reason = absl::StrCat("no connection within ", absl::FormatDuration(timeout));
  if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) {
    // gRPC keeps the reason of the last failed attempt; a fail-fast call on
    // the broken channel returns it at once.
    grpc::ClientContext context;
    context.set_deadline(ToChrono(absl::Now() + absl::Seconds(1)));
    v1::GetStatusResponse ignored;
    grpc::Status probe = v1::Gpuctl::NewStub(channel)->GetStatus(&context, {}, &ignored);
    if (!probe.ok() && probe.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      reason = probe.error_message();
      reason += SecurityHint(reason, security);
    }
  }
  return FromRpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, reason));
}

absl::Status FromRpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  out.SetPayload(kRpcErrorPayload, absl::Cord("1"));
  return out;
}

bool IsRpcError(const absl::Status& status) {
  return status.GetPayload(kRpcErrorPayload).has_value();
}

int ReportError(const absl::Status& status, absl::string_view host, std::ostream& err) {
  const std::string message = Printable(status.message());
  if (!IsRpcError(status)) {
    err << "gpuctl: " << message << "\n";
    return kExitPartialFailure;
  }
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      err << "gpuctl: " << message << "\n";
      return kExitNothingMatched;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      err << "gpuctl: cannot reach gpuctld at " << host << ": " << message << "\n";
      return kExitDaemonError;
    case absl::StatusCode::kUnauthenticated:
      err << "gpuctl: gpuctld at " << host << " " << kUnauthenticatedText << message
          << kUnauthenticatedHint << "\n";
      return kExitDaemonError;
    default:
      err << "gpuctl: gpuctld at " << host << " refused the request: " << message << "\n";
      return kExitDaemonError;
  }
}

}  // namespace gpuctl::cli
