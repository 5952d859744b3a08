#ifndef GPUCTL_CLI_CONNECTION_H_
#define GPUCTL_CLI_CONNECTION_H_

#include <atomic>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/status.h"

namespace gpuctl::cli {

inline constexpr absl::string_view kDefaultHost = "127.0.0.1:7070";
inline constexpr int kDefaultPort = 7070;

// The credentials of every connection to gpuctld (channel_security.h
// builds them from flags): plain text when `credentials` is null.
struct ChannelSecurity {
  bool tls = false;
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // Overrides the name checked against the server certificate.
  std::string server_name;
  // Sent as "authorization: Bearer <token>" on every call when not empty.
  std::string token;
};

// Turns what a user typed into a gRPC target: "node7" -> "node7:7070",
// "::1" -> "[::1]:7070"; "HOST:PORT", "[v6]:PORT" and URIs ("dns:///...",
// "unix:...") pass through. INVALID_ARGUMENT for an empty host or a bad
// port.
absl::StatusOr<std::string> NormalizeHost(absl::string_view host);

// Opens a channel to `target` and waits until it is connected, at most
// `timeout`. A refused connection fails at once (no retry loop), an absent
// host after `timeout`; both as UNAVAILABLE carrying gRPC's reason, marked
// as an RPC error (see IsRpcError). When `cancelled` is given and becomes
// true, the wait ends within kConnectCancelLatency with CANCELLED (not an
// RPC error). A connection that fails after reaching the host says whether
// a TLS mismatch may be the cause.
inline constexpr absl::Duration kConnectCancelLatency = absl::Milliseconds(50);
absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(const std::string& target,
                                                       absl::Duration timeout,
                                                       const std::atomic<bool>* cancelled = nullptr,
                                                       const ChannelSecurity& security = {});

// Converts a status returned by the daemon (or by gRPC on its behalf) and
// marks it so callers can tell it from a local failure.
absl::Status FromRpcStatus(const grpc::Status& status);
bool IsRpcError(const absl::Status& status);

// Prints what went wrong, for a user, and returns the exit code:
// NOT_FOUND from the daemon -> kExitNothingMatched; unreachable (UNAVAILABLE,
// DEADLINE_EXCEEDED) -> "cannot reach gpuctld at HOST: ..." and
// kExitDaemonError; any other daemon error -> "gpuctld at HOST refused the
// request: ..." and kExitDaemonError; a local failure -> kExitPartialFailure.
int ReportError(const absl::Status& status, absl::string_view host, std::ostream& err);

// How an UNAUTHENTICATED answer reads: "gpuctld at HOST " + text + the
// daemon's message + hint.
inline constexpr absl::string_view kUnauthenticatedText =
    "rejected the credentials (UNAUTHENTICATED): ";
inline constexpr absl::string_view kUnauthenticatedHint =
    "; pass the daemon's token with --token-file or $GPUCTL_TOKEN_FILE";

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_CONNECTION_H_
