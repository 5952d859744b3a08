#ifndef GPUCTL_DAEMON_IPC_SOCKET_ACCESS_H_
#define GPUCTL_DAEMON_IPC_SOCKET_ACCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

// Who may reach gpuctld's IPC socket: the socket file's mode and group, and
// the checks on the directory that holds it. Parsing helpers are shared by
// the configuration file and the flags.
namespace gpuctl::daemon {

inline constexpr uint32_t kDefaultSocketMode = 0660;

struct SocketAccess {
  // Permission bits of the socket file (at most 0777).
  uint32_t mode = kDefaultSocketMode;
  // Set: the socket file (and a directory the daemon creates) get this group.
  std::optional<gid_t> group;
};

// "0660", "660", "0o660": 3 or 4 octal digits, at most 0777 (no setuid,
// setgid or sticky bits). INVALID_ARGUMENT naming the text otherwise.
absl::StatusOr<uint32_t> ParseSocketMode(absl::string_view text);

// Whether `text` can name a group / a user: a name without blanks or
// control characters, or a number in range. INVALID_ARGUMENT otherwise.
absl::Status CheckGroupSpelling(absl::string_view text);
absl::Status CheckUserSpelling(absl::string_view text);

// A group name from the group database, or a numeric gid.
// INVALID_ARGUMENT when there is no such group or the number is out of range.
absl::StatusOr<gid_t> ResolveGroup(absl::string_view name_or_gid);

// A user name from the password database, or a numeric uid.
absl::StatusOr<uid_t> ResolveUser(absl::string_view name_or_uid);

// "0660".
std::string FormatSocketMode(uint32_t mode);

// Makes the directory that will hold the socket, or checks an existing one.
// A directory created here (its missing parents 0755) is 0755, or 0750 and
// chowned to access.group when one is set. An existing directory is used
// as it is, but refused (FAILED_PRECONDITION, saying why and what to do)
// when anyone may write to it without the sticky bit, or when it belongs to
// another user than the daemon's and root. `daemon_uid` is geteuid() (tests
// pass another).
absl::Status PrepareSocketDirectory(const std::string& dir, const SocketAccess& access,
                                    uid_t daemon_uid);

// Gives the bound socket file its group and mode (before listen(), so no
// connection gets through with the wrong ones).
absl::Status ApplySocketAccess(const std::string& path, const SocketAccess& access);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_IPC_SOCKET_ACCESS_H_
