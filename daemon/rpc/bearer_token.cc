#include "daemon/rpc/bearer_token.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpuctl::daemon {
namespace {

constexpr absl::string_view kBearerPrefix = "Bearer ";

void Sha256Of(absl::string_view text, unsigned char out[SHA256_DIGEST_LENGTH]) {
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), out);
}

absl::Status TokenFileError(const std::string& path, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--auth-token-file ", path, ": ", why));
}

}  // namespace

bool TokensEqual(absl::string_view a, absl::string_view b) {
  unsigned char da[SHA256_DIGEST_LENGTH];
  unsigned char db[SHA256_DIGEST_LENGTH];
  Sha256Of(a, da);
  Sha256Of(b, db);
  return CRYPTO_memcmp(da, db, SHA256_DIGEST_LENGTH) == 0;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return TokenFileError(path, std::strerror(errno));
  struct stat st {};
  std::string content;
  absl::Status status;
  if (fstat(fd, &st) != 0) {
    status = TokenFileError(path, std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    status = TokenFileError(path, "not a regular file");
  } else if ((st.st_mode & 077) != 0) {
    status = TokenFileError(
        path, absl::StrFormat("mode %04o lets its group or others at the token; chmod 600 it",
                              st.st_mode & 07777));
  } else if (st.st_size > static_cast<off_t>(kMaxBearerTokenBytes + 64)) {
    status = TokenFileError(path, absl::StrCat("larger than ", kMaxBearerTokenBytes, " bytes"));
  } else {
    content.resize(static_cast<size_t>(st.st_size));
    ssize_t n = read(fd, content.data(), content.size());
    if (n < 0) status = TokenFileError(path, std::strerror(errno));
    content.resize(n < 0 ? 0 : static_cast<size_t>(n));
  }
  close(fd);
  if (!status.ok()) return status;
  absl::string_view token = absl::StripTrailingAsciiWhitespace(content);
  if (token.empty()) return TokenFileError(path, "empty; write the token into it");
  if (token.size() > kMaxBearerTokenBytes) {
    return TokenFileError(path, absl::StrCat("token longer than ", kMaxBearerTokenBytes, " bytes"));
  }
  for (char c : token) {
    if (c <= ' ' || c > '~') {
      return TokenFileError(path, "the token must be printable ASCII without spaces");
    }
  }
  return std::string(token);
}

grpc::Status BearerTokenAuth::Check(const grpc::ServerContextBase& context,
                                    const TokenScope** scope) const {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this gpuctld requires a bearer token (authorization metadata)");
  }
  absl::string_view value(it->second.data(), it->second.size());
  if (!absl::StartsWith(value, kBearerPrefix)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "invalid bearer token");
  }
  absl::string_view sent = value.substr(kBearerPrefix.size());
  bool unscoped = !token_.empty() && TokensEqual(sent, token_);
  const TokenScope* matched = nullptr;
  for (const ScopedToken& t : scoped_) {
    if (TokensEqual(sent, t.token) && matched == nullptr) matched = &t.scope;
  }
  if (!unscoped && matched == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "invalid bearer token");
  }
  if (scope != nullptr) *scope = unscoped ? nullptr : matched;
  return grpc::Status::OK;
}

}  // namespace gpuctl::daemon
