#ifndef GPUCTL_CLI_CHANNEL_SECURITY_H_
#define GPUCTL_CLI_CHANNEL_SECURITY_H_

#include <string>

#include "absl/status/statusor.h"
#include "cli/connection.h"

namespace CLI {
class App;
}  // namespace CLI

namespace gpuctl::cli {

// How to reach gpuctld securely, as given on the command line
// (--tls, --tls-ca, ...) or in the environment (GPUCTL_TLS_CA, ...): file
// paths, empty when not given.
struct SecurityFlags {
  bool tls = false;
  std::string ca;
  std::string cert;
  std::string key;
  std::string server_name;
  std::string token_file;
};

// Adds --tls, --tls-ca, --tls-cert, --tls-key, --tls-server-name and
// --token-file to `cmd`.
void AddSecurityFlags(CLI::App* cmd, SecurityFlags& flags);

// The environment's settings: GPUCTL_TLS_CA, GPUCTL_TLS_CERT,
// GPUCTL_TLS_KEY, GPUCTL_TOKEN_FILE.
SecurityFlags SecurityFromEnvironment();

// Merges `flags` over `env` (a flag wins over its variable), reads the
// files and builds the credentials every connection uses. TLS is on with
// --tls or any TLS file; --tls-ca replaces the system roots; a client
// certificate needs its key. INVALID_ARGUMENT names the flag at fault.
absl::StatusOr<ChannelSecurity> ResolveChannelSecurity(const SecurityFlags& flags,
                                                       const SecurityFlags& env);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_CHANNEL_SECURITY_H_
