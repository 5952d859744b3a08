#ifndef GPUCTL_DAEMON_RPC_TRANSPORT_SECURITY_H_
#define GPUCTL_DAEMON_RPC_TRANSPORT_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"

namespace gpuctl::daemon {

// PEM files of the gRPC server's TLS identity (--tls-cert, --tls-key) and,
// for mutual TLS, the CA that client certificates must chain to
// (--tls-client-ca). All empty: plain text.
struct ServerTlsFiles {
  std::string cert;
  std::string key;
  std::string client_ca;

  bool enabled() const { return !cert.empty(); }
};

// Reads and checks the files now, so that a missing file, one that is not
// PEM or a key that does not belong to the certificate stops the daemon at
// startup rather than failing every handshake later. Plain-text credentials
// when `files` is not enabled().
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsFiles& files);

// The whole of a small file (at most 1 MiB), or an error naming `what` and
// `path`.
absl::StatusOr<std::string> ReadSmallFile(const std::string& what, const std::string& path);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_RPC_TRANSPORT_SECURITY_H_
