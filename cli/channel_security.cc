#include "cli/channel_security.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/security/credentials.h"

namespace gpuctl::cli {
namespace {

constexpr size_t kMaxSecurityFileBytes = size_t{1} << 20;

absl::StatusOr<std::string> ReadSecurityFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  std::string content = std::move(text).str();
  if (content.size() > kMaxSecurityFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is too large"));
  }
  return content;
}

const std::string& Pick(const std::string& flag, const std::string& env) {
  return flag.empty() ? env : flag;
}

std::string EnvOrEmpty(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

absl::StatusOr<std::string> ReadToken(const std::string& path) {
  absl::StatusOr<std::string> content = ReadSecurityFile("--token-file", path);
  if (!content.ok()) return content.status();
  std::string token(absl::StripTrailingAsciiWhitespace(*content));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--token-file: ", path, " is empty"));
  }
  for (char c : token) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(absl::StrCat("--token-file: the token in ", path,
                                                     " must be printable ASCII without spaces"));
    }
  }
  return token;
}

}  // namespace

void AddSecurityFlags(CLI::App* cmd, SecurityFlags& flags) {
  cmd->add_flag("--tls", flags.tls, "Connect over TLS, trusting the system's CA certificates");
  cmd->add_option("--tls-ca", flags.ca,
                  "Connect over TLS, trusting this PEM CA (default $GPUCTL_TLS_CA)");
  cmd->add_option("--tls-cert", flags.cert,
                  "Client certificate (PEM) for mutual TLS (default $GPUCTL_TLS_CERT)");
  cmd->add_option("--tls-key", flags.key,
                  "Private key (PEM) of --tls-cert (default $GPUCTL_TLS_KEY)");
  cmd->add_option("--tls-server-name", flags.server_name,
                  "Name the server certificate must carry, if not the host's");
  cmd->add_option("--token-file", flags.token_file,
                  "Send the bearer token in this file (default $GPUCTL_TOKEN_FILE)");
}

SecurityFlags SecurityFromEnvironment() {
  SecurityFlags env;
  env.ca = EnvOrEmpty("GPUCTL_TLS_CA");
  env.cert = EnvOrEmpty("GPUCTL_TLS_CERT");
  env.key = EnvOrEmpty("GPUCTL_TLS_KEY");
  env.token_file = EnvOrEmpty("GPUCTL_TOKEN_FILE");
  return env;
}

absl::StatusOr<ChannelSecurity> ResolveChannelSecurity(const SecurityFlags& flags,
                                                       const SecurityFlags& env) {
  const std::string& ca = Pick(flags.ca, env.ca);
  const std::string& cert = Pick(flags.cert, env.cert);
  const std::string& key = Pick(flags.key, env.key);
  const std::string& token_file = Pick(flags.token_file, env.token_file);
  ChannelSecurity security;
  security.tls = flags.tls || env.tls || !ca.empty() || !cert.empty() || !key.empty();
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together (a client certificate and its key)");
  }
  if (!flags.server_name.empty() && !security.tls) {
    return absl::InvalidArgumentError("--tls-server-name needs TLS (--tls or --tls-ca)");
  }
  security.server_name = flags.server_name;
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = ReadToken(token_file);
    if (!token.ok()) return token.status();
    security.token = *std::move(token);
  }
  if (!security.tls) return security;
  grpc::SslCredentialsOptions ssl;
  if (!ca.empty()) {
    absl::StatusOr<std::string> pem = ReadSecurityFile("--tls-ca", ca);
    if (!pem.ok()) return pem.status();
    ssl.pem_root_certs = *std::move(pem);
  }
  if (!cert.empty()) {
    absl::StatusOr<std::string> cert_pem = ReadSecurityFile("--tls-cert", cert);
    if (!cert_pem.ok()) return cert_pem.status();
    absl::StatusOr<std::string> key_pem = ReadSecurityFile("--tls-key", key);
    if (!key_pem.ok()) return key_pem.status();
    ssl.pem_cert_chain = *std::move(cert_pem);
    ssl.pem_private_key = *std::move(key_pem);
  }
  security.credentials = grpc::SslCredentials(ssl);
  return security;
}

}  // namespace gpuctl::cli
