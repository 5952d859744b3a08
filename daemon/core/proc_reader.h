#ifndef GPUCTL_DAEMON_CORE_PROC_READER_H_
#define GPUCTL_DAEMON_CORE_PROC_READER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace gpuctl::daemon {

// How far up the process tree the registry looks for ancestors.
inline constexpr int kMaxAncestors = 64;

// What the registry learns about processes from the kernel, in the
// daemon's pid namespace. Implementations need not be thread-safe; a
// Registry calls its reader on the event loop only.
class ProcReader {
 public:
  virtual ~ProcReader() = default;

  // `pid`'s pid in its innermost pid namespace; nullopt when unreadable.
  virtual std::optional<int64_t> InnermostPid(int32_t pid) const = 0;
  // `pid`'s parent; nullopt when unreadable.
  virtual std::optional<int32_t> ParentPid(int32_t pid) const = 0;
};

// Reads a procfs mounted at `proc_root`: InnermostPid from the last entry of
// the NSpid line of `<proc_root>/<pid>/status`, ParentPid from the ppid
// field of `<proc_root>/<pid>/stat`.
class ProcfsReader : public ProcReader {
 public:
  explicit ProcfsReader(std::string proc_root = "/proc") : proc_root_(std::move(proc_root)) {}

  std::optional<int64_t> InnermostPid(int32_t pid) const override;
  std::optional<int32_t> ParentPid(int32_t pid) const override;

 private:
  std::string proc_root_;
};

// The parent chain of `pid`, nearest first: at most kMaxAncestors, ending
// after pid 1 or at the first unreadable entry. Empty when `pid`'s own
// entry is unreadable.
std::vector<int32_t> ReadAncestors(const ProcReader& proc, int32_t pid);
// The same, read from the procfs at `proc_root`.
std::vector<int32_t> ReadAncestors(absl::string_view proc_root, int32_t pid);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_PROC_READER_H_
