#ifndef GPUCTL_DAEMON_S3_CREDENTIALS_H_
#define GPUCTL_DAEMON_S3_CREDENTIALS_H_

#include <sys/types.h>

#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "daemon/s3/s3_config.h"

namespace gpuctl::s3 {

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  // Empty unless the keys are temporary (STS); sent as x-amz-security-token.
  std::string session_token;
};

// Looks up an environment variable; nullopt when unset. Injected so that
// tests and embedders never touch the process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
// std::getenv.
std::optional<std::string> ProcessEnv(const std::string& name);

// INVALID_ARGUMENT unless the key id and secret are non-empty printable
// ASCII without spaces (the id without '/' or ','; both end up in the
// Authorization header) and the session token is printable ASCII.
absl::Status ValidateCredentials(const S3Credentials& credentials, absl::string_view source);

// Parses an AWS shared credentials file (INI): "[name]" (or "[profile
// name]") sections with aws_access_key_id, aws_secret_access_key and
// aws_session_token; '#' and ';' start comments. `source` names the file in
// errors. NOT_FOUND when the profile is missing.
absl::StatusOr<S3Credentials> ParseSharedCredentials(absl::string_view text,
                                                     absl::string_view profile,
                                                     absl::string_view source);

// Resolves credentials in S3Config's order once, at Create(). A credentials
// file is re-read whenever its inode, modification time or size changes, so keys
// rotated in place are picked up without a restart; should a re-read fail,
// the last good keys stay in use (and the failure is logged). Thread-safe.
class CredentialsProvider {
 public:
  static absl::StatusOr<std::unique_ptr<CredentialsProvider>> Create(const S3Config& config,
                                                                     const EnvLookup& env);

  S3Credentials Get();
  // Where the keys come from: "config", "environment" or "file PATH [profile]".
  const std::string& source() const { return source_; }

 private:
  CredentialsProvider(std::string source, S3Credentials credentials)
      : source_(std::move(source)), credentials_(std::move(credentials)) {}

  const std::string source_;
  std::string file_;  // set once in Create()
  std::string profile_;
  absl::Mutex mu_;
  S3Credentials credentials_ ABSL_GUARDED_BY(mu_);
  timespec file_mtime_ ABSL_GUARDED_BY(mu_) = {};
  off_t file_size_ ABSL_GUARDED_BY(mu_) = 0;
  ino_t file_inode_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpuctl::s3

#endif  // GPUCTL_DAEMON_S3_CREDENTIALS_H_
