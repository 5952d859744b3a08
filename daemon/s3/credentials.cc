#include "daemon/s3/credentials.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/common/log.h"

namespace gpuctl::s3 {
namespace {

constexpr size_t kMaxCredentialsFileBytes = 1 << 20;

struct FileSnapshot {
  std::string text;
  timespec mtime = {};
  off_t size = 0;
  ino_t inode = 0;
};

absl::StatusOr<FileSnapshot> ReadCredentialsFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::string msg = absl::StrCat("S3 credentials file ", path, ": ", std::strerror(errno));
    return errno == ENOENT ? absl::NotFoundError(msg) : absl::PermissionDeniedError(msg);
  }
  FileSnapshot snap;
  struct stat st;
  absl::Status status;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = absl::FailedPreconditionError(
        absl::StrCat("S3 credentials file ", path, " is not a regular file"));
  } else if (static_cast<uint64_t>(st.st_size) > kMaxCredentialsFileBytes) {
    status =
        absl::FailedPreconditionError(absl::StrCat("S3 credentials file ", path, " is over 1 MiB"));
  }
  char buf[4096];
  while (status.ok()) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = absl::InternalError(absl::StrCat("reading ", path, ": ", std::strerror(errno)));
    } else if (n == 0) {
      break;
    } else {
      snap.text.append(buf, static_cast<size_t>(n));
      if (snap.text.size() > kMaxCredentialsFileBytes) {
        status = absl::FailedPreconditionError(
            absl::StrCat("S3 credentials file ", path, " is over 1 MiB"));
      }
    }
  }
  ::close(fd);
  if (!status.ok()) return status;
  snap.mtime = st.st_mtim;
  snap.size = st.st_size;
  snap.inode = st.st_ino;
  return snap;
}

bool IsPrintableAscii(absl::string_view s, bool allow_space) {
  for (char c : s) {
    if (c < 0x21 || c > 0x7e) {
      if (!(allow_space && c == ' ')) return false;
    }
  }
  return true;
}

std::optional<std::string> NonEmpty(const EnvLookup& env, const std::string& name) {
  std::optional<std::string> value = env(name);
  if (value.has_value() && value->empty()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<std::string> ProcessEnv(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

absl::Status ValidateCredentials(const S3Credentials& c, absl::string_view source) {
  if (c.access_key_id.empty() || c.secret_access_key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("S3 credentials from ", source, ": access key id or secret key is empty"));
  }
  if (!IsPrintableAscii(c.access_key_id, false) || absl::StrContains(c.access_key_id, "/") ||
      absl::StrContains(c.access_key_id, ",")) {
    return absl::InvalidArgumentError(
        absl::StrCat("S3 credentials from ", source,
                     ": access key id has a character other than printable "
                     "ASCII without space, '/' and ','"));
  }
  if (!IsPrintableAscii(c.secret_access_key, false) || !IsPrintableAscii(c.session_token, false)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "S3 credentials from ", source, ": secret key or session token is not printable ASCII"));
  }
  return absl::OkStatus();
}

absl::StatusOr<S3Credentials> ParseSharedCredentials(absl::string_view text,
                                                     absl::string_view profile,
                                                     absl::string_view source) {
  S3Credentials creds;
  bool found = false;
  bool in_profile = false;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      if (line.back() != ']') {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ":", line_no, ": unterminated section header"));
      }
      absl::string_view name = absl::StripAsciiWhitespace(line.substr(1, line.size() - 2));
      if (absl::ConsumePrefix(&name, "profile ")) name = absl::StripLeadingAsciiWhitespace(name);
      in_profile = name == profile;
      found = found || in_profile;
      continue;
    }
    size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", line_no, ": expected key = value or [section]"));
    }
    if (!in_profile) continue;
    std::string key = absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, eq)));
    std::string value(absl::StripAsciiWhitespace(line.substr(eq + 1)));
    if (key == "aws_access_key_id") {
      creds.access_key_id = std::move(value);
    } else if (key == "aws_secret_access_key") {
      creds.secret_access_key = std::move(value);
    } else if (key == "aws_session_token") {
      creds.session_token = std::move(value);
    }
  }
  if (!found) {
    return absl::NotFoundError(absl::StrCat("no profile [", profile, "] in ", source));
  }
  std::string where = absl::StrCat(source, " [", profile, "]");
  if (auto st = ValidateCredentials(creds, where); !st.ok()) return st;
  return creds;
}

absl::StatusOr<std::unique_ptr<CredentialsProvider>> CredentialsProvider::Create(
    const S3Config& config, const EnvLookup& env) {
  if (!config.access_key_id.empty() || !config.secret_access_key.empty()) {
    S3Credentials creds{config.access_key_id, config.secret_access_key, config.session_token};
    if (auto st = ValidateCredentials(creds, "config"); !st.ok()) return st;
    return std::unique_ptr<CredentialsProvider>(new CredentialsProvider("config", creds));
  }
  if (!config.credentials_file.empty()) {
    auto snap = ReadCredentialsFile(config.credentials_file);
    if (!snap.ok()) return snap.status();
    auto creds = ParseSharedCredentials(snap->text, config.profile, config.credentials_file);
    if (!creds.ok()) return creds.status();
    std::unique_ptr<CredentialsProvider> provider(new CredentialsProvider(
        absl::StrCat("file ", config.credentials_file, " [", config.profile, "]"), *creds));
    provider->file_ = config.credentials_file;
    provider->profile_ = config.profile;
    absl::MutexLock lock(&provider->mu_);
    provider->file_mtime_ = snap->mtime;
    provider->file_size_ = snap->size;
    provider->file_inode_ = snap->inode;
    return provider;
  }
  std::optional<std::string> id = NonEmpty(env, "AWS_ACCESS_KEY_ID");
  std::optional<std::string> secret = NonEmpty(env, "AWS_SECRET_ACCESS_KEY");
  if (id.has_value() != secret.has_value()) {
    return absl::FailedPreconditionError(
        "S3 credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together");
  }
  if (!id.has_value()) {
    return absl::FailedPreconditionError(
        "no S3 credentials: set access_key_id and secret_access_key or credentials_file in the "
        "configuration, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment");
  }
  S3Credentials creds{*id, *secret, env("AWS_SESSION_TOKEN").value_or("")};
  if (auto st = ValidateCredentials(creds, "the environment"); !st.ok()) return st;
  return std::unique_ptr<CredentialsProvider>(new CredentialsProvider("environment", creds));
}

S3Credentials CredentialsProvider::Get() {
  absl::MutexLock lock(&mu_);
  if (file_.empty()) return credentials_;
  struct stat st;
  if (::stat(file_.c_str(), &st) != 0) return credentials_;
  if (st.st_ino == file_inode_ && st.st_size == file_size_ &&
      st.st_mtim.tv_sec == file_mtime_.tv_sec && st.st_mtim.tv_nsec == file_mtime_.tv_nsec) {
    return credentials_;
  }
  // Remember this version whatever the outcome, so a bad file is reported
  // once, not on every request.
  file_mtime_ = st.st_mtim;
  file_size_ = st.st_size;
  file_inode_ = st.st_ino;
  auto snap = ReadCredentialsFile(file_);
  absl::StatusOr<S3Credentials> fresh =
      snap.ok() ? ParseSharedCredentials(snap->text, profile_, file_) : snap.status();
  if (!fresh.ok()) {
    LogWarning("S3 credentials file changed but cannot be used; keeping the previous keys",
               {{"file", file_}, {"error", fresh.status().ToString()}});
    return credentials_;
  }
  credentials_ = *std::move(fresh);
  LogInfo("S3 credentials reloaded", {{"file", file_}, {"profile", profile_}});
  return credentials_;
}

}  // namespace gpuctl::s3
