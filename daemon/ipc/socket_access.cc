#include "daemon/ipc/socket_access.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpuctl::daemon {
namespace {

// (uid_t)-1 and (gid_t)-1 mean "unchanged" to chown.
constexpr uint64_t kMaxId = 0xFFFFFFFEu;
constexpr size_t kMaxNameBytes = 256;

bool AllDigits(absl::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return absl::ascii_isdigit(c); });
}

absl::StatusOr<uint32_t> ParseId(absl::string_view what, absl::string_view text) {
  uint64_t id = 0;
  if (!absl::SimpleAtoi(text, &id) || id > kMaxId) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", text, " is out of range (0 to ", kMaxId, ")"));
  }
  return static_cast<uint32_t>(id);
}

absl::Status CheckName(absl::string_view what, absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be a name or a number of 1 to ", kMaxNameBytes, " bytes"));
  }
  for (char c : name) {
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " \"", absl::CEscape(name), "\" holds a blank or control character"));
    }
  }
  return absl::OkStatus();
}

absl::Status Errno(absl::string_view what, const std::string& path, int err) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(err)));
}

// mkdir -p; the last component gets `mode` (and `group`), the others 0755.
absl::Status MakeDirectories(const std::string& dir, mode_t mode, std::optional<gid_t> group) {
  size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    std::string parent = dir.substr(0, slash);
    struct stat st {};
    if (stat(parent.c_str(), &st) != 0) {
      if (absl::Status s = MakeDirectories(parent, 0755, std::nullopt); !s.ok()) return s;
    }
  }
  if (mkdir(dir.c_str(), mode) != 0) {
    if (errno == EEXIST) return absl::OkStatus();
    return Errno("cannot create directory", dir, errno);
  }
  // mkdir's mode went through the umask.
  if (chmod(dir.c_str(), mode) != 0) return Errno("cannot chmod", dir, errno);
  if (group.has_value() && chown(dir.c_str(), static_cast<uid_t>(-1), *group) != 0) {
    return Errno(absl::StrCat("cannot give group ", *group, " to"), dir, errno);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckGroupSpelling(absl::string_view text) {
  if (absl::Status s = CheckName("socket group", text); !s.ok()) return s;
  return AllDigits(text) ? ParseId("gid", text).status() : absl::OkStatus();
}

absl::Status CheckUserSpelling(absl::string_view text) {
  if (absl::Status s = CheckName("user", text); !s.ok()) return s;
  return AllDigits(text) ? ParseId("uid", text).status() : absl::OkStatus();
}

absl::StatusOr<uint32_t> ParseSocketMode(absl::string_view text) {
  absl::string_view digits = absl::StripAsciiWhitespace(text);
  if (absl::StartsWith(digits, "0o") || absl::StartsWith(digits, "0O")) digits.remove_prefix(2);
  auto bad = [&text](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("socket mode \"", absl::CEscape(text), "\" ", why,
                     " (write permission bits in octal, like \"0660\")"));
  };
  if (digits.size() < 3 || digits.size() > 4) return bad("is not 3 or 4 octal digits");
  uint32_t mode = 0;
  for (char c : digits) {
    if (c < '0' || c > '7') return bad("is not octal");
    mode = mode * 8 + static_cast<uint32_t>(c - '0');
  }
  if (mode > 0777) return bad("sets setuid, setgid or sticky bits");
  if ((mode & 0600) != 0600) return bad("must let the daemon's user read and write (0600)");
  return mode;
}

std::string FormatSocketMode(uint32_t mode) { return absl::StrFormat("%04o", mode); }

absl::StatusOr<gid_t> ResolveGroup(absl::string_view name_or_gid) {
  if (absl::Status s = CheckName("socket group", name_or_gid); !s.ok()) return s;
  if (AllDigits(name_or_gid)) return ParseId("gid", name_or_gid);
  std::string name(name_or_gid);
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer(16384);
  int err = getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found);
  if (err != 0 || found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("no group named \"", name, "\"",
                     err != 0 ? absl::StrCat(" (", std::strerror(err), ")") : "",
                     "; give an existing group or a numeric gid"));
  }
  return found->gr_gid;
}

absl::StatusOr<uid_t> ResolveUser(absl::string_view name_or_uid) {
  if (absl::Status s = CheckName("user", name_or_uid); !s.ok()) return s;
  if (AllDigits(name_or_uid)) return ParseId("uid", name_or_uid);
  std::string name(name_or_uid);
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  int err = getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found);
  if (err != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no user named \"", name, "\"", err != 0 ? absl::StrCat(" (", std::strerror(err), ")") : "",
        "; give an existing user or a numeric uid"));
  }
  return found->pw_uid;
}

absl::Status PrepareSocketDirectory(const std::string& dir, const SocketAccess& access,
                                    uid_t daemon_uid) {
  if (dir.empty()) return absl::OkStatus();
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return Errno("cannot stat", dir, errno);
    return MakeDirectories(dir, access.group.has_value() ? 0750 : 0755, access.group);
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, " exists and is not a directory"));
  }
  if ((st.st_mode & S_IWOTH) != 0 && (st.st_mode & S_ISVTX) == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing socket directory ", dir, ": anyone may write to it (mode ",
        FormatSocketMode(st.st_mode & 07777),
        ") without the sticky bit, so another user could replace the socket; use a directory "
        "only gpuctld's user can write to, like /run/gpuctl"));
  }
  if (st.st_uid != daemon_uid && st.st_uid != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing socket directory ", dir, ": it belongs to uid ", st.st_uid,
        ", neither gpuctld's user (uid ", daemon_uid,
        ") nor root, who could replace the socket; use a directory gpuctld's user owns"));
  }
  return absl::OkStatus();
}

absl::Status ApplySocketAccess(const std::string& path, const SocketAccess& access) {
  if (access.group.has_value() && chown(path.c_str(), static_cast<uid_t>(-1), *access.group) != 0) {
    return Errno(absl::StrCat("cannot give group ", *access.group, " to"), path, errno);
  }
  if (chmod(path.c_str(), static_cast<mode_t>(access.mode)) != 0) {
    return Errno("cannot chmod", path, errno);
  }
  return absl::OkStatus();
}

}  // namespace gpuctl::daemon
