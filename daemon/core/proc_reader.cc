#include "daemon/core/proc_reader.h"

#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gpuctl::daemon {

// The status line looks like "NSpid:\t4711\t12\t1", outermost first.
std::optional<int64_t> ProcfsReader::InnermostPid(int32_t pid) const {
  std::ifstream status(absl::StrCat(proc_root_, "/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (!absl::StartsWith(line, "NSpid:")) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(
        absl::string_view(line).substr(6), absl::ByAnyChar(" \t"), absl::SkipEmpty());
    int64_t innermost = 0;
    if (fields.empty() || !absl::SimpleAtoi(fields.back(), &innermost)) return std::nullopt;
    return innermost;
  }
  return std::nullopt;
}

// The stat line looks like "4711 (python3) S 4700 ..."; the command name
// may hold spaces and parentheses, so fields are counted from the last ')'.
std::optional<int32_t> ProcfsReader::ParentPid(int32_t pid) const {
  std::ifstream file(absl::StrCat(proc_root_, "/", pid, "/stat"));
  std::string stat;
  if (!std::getline(file, stat)) return std::nullopt;
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(close + 1), ' ', absl::SkipEmpty());
  int32_t ppid = 0;
  if (fields.size() < 2 || !absl::SimpleAtoi(fields[1], &ppid)) return std::nullopt;
  return ppid;
}

std::vector<int32_t> ReadAncestors(const ProcReader& proc, int32_t pid) {
  std::vector<int32_t> out;
  int32_t current = pid;
  while (out.size() < static_cast<size_t>(kMaxAncestors)) {
    std::optional<int32_t> ppid = proc.ParentPid(current);
    if (!ppid.has_value() || *ppid <= 0 || *ppid == current) break;
    out.push_back(*ppid);
    if (*ppid == 1) break;
    current = *ppid;
  }
  return out;
}

std::vector<int32_t> ReadAncestors(absl::string_view proc_root, int32_t pid) {
  return ReadAncestors(ProcfsReader(std::string(proc_root)), pid);
}

}  // namespace gpuctl::daemon
