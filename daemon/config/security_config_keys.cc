// The tls and auth sections: the gRPC API's transport security and bearer
// token. Files are named here and read at startup (daemon/rpc).
#include <string>

#include "daemon/config/config_schema.h"

namespace gpuctl::daemon {
namespace {

// A path: a non-empty string.
absl::Status ReadSecurityPath(const ConfigValue& v, std::string* out) {
  absl::StatusOr<std::string> text = v.String();
  if (!text.ok()) return text.status();
  if (text->empty()) return v.Error("must not be empty; leave the key out instead");
  *out = *std::move(text);
  return absl::OkStatus();
}

constexpr ConfigKey kTlsKeys[] = {
    {.name = "cert",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return ReadSecurityPath(v, &o->tls_cert); }},
    {.name = "key",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return ReadSecurityPath(v, &o->tls_key); }},
    {.name = "client_ca",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return ReadSecurityPath(v, &o->tls_client_ca); }},
};

constexpr ConfigKey kAuthKeys[] = {
    {.name = "token_file",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return ReadSecurityPath(v, &o->auth_token_file); }},
};

}  // namespace

absl::Span<const ConfigKey> TlsConfigKeys() { return kTlsKeys; }
absl::Span<const ConfigKey> AuthConfigKeys() { return kAuthKeys; }

}  // namespace gpuctl::daemon
