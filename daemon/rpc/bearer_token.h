#ifndef GPUCTL_DAEMON_RPC_BEARER_TOKEN_H_
#define GPUCTL_DAEMON_RPC_BEARER_TOKEN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/core/token_scope.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace gpuctl::daemon {

// The longest token accepted, in bytes.
inline constexpr size_t kMaxBearerTokenBytes = 4096;

// Reads --auth-token-file: the token is the file's content without trailing
// whitespace, non-empty printable ASCII without spaces. The file must be a
// regular file that neither its group nor others can read or write (mode
// 0600 or 0400), else the token could already be known to others.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// Equal tokens, in time independent of where they differ and of their
// lengths: SHA-256 of both, compared with CRYPTO_memcmp.
bool TokensEqual(absl::string_view a, absl::string_view b);

// Checks the "authorization: Bearer <token>" metadata of each call of the
// gpuctl.v1.Gpuctl service (grpc.health.v1 and reflection stay open: they
// are separate services) against the unscoped token (auth.token_file) and
// the scoped ones (auth.tokens). Thread-safe; immutable.
class BearerTokenAuth {
 public:
  struct ScopedToken {
    TokenScope scope;
    std::string token;
  };
  // `token`: the token that reaches everything; empty for none (then only
  // scoped tokens are accepted).
  explicit BearerTokenAuth(std::string token, std::vector<ScopedToken> scoped = {})
      : token_(std::move(token)), scoped_(std::move(scoped)) {}

  // OK, or UNAUTHENTICATED with a message that never quotes what was sent.
  // On OK, `*scope` (when given) is the scope of the token that matched, or
  // null for the unscoped token. Every token is compared, whichever
  // matches, so the time taken does not tell which.
  grpc::Status Check(const grpc::ServerContextBase& context,
                     const TokenScope** scope = nullptr) const;

 private:
  const std::string token_;
  const std::vector<ScopedToken> scoped_;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_RPC_BEARER_TOKEN_H_
