#include "daemon/kineto/kineto_procfs.h"

#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/common/posix_file.h"

namespace gpuctl::daemon::kineto {
namespace {

// What is read of a /proc file at most.
constexpr size_t kMaxProcFileBytes = 256 * 1024;
constexpr size_t kMaxCmdlineArgs = 256;
constexpr size_t kMaxValueBytes = 256;

std::optional<std::string> ReadProcFile(const std::string& path) {
  ::gpuctl::UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) return std::nullopt;
  std::string out;
  char buf[8192];
  while (out.size() < kMaxProcFileBytes) {
    const ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace

std::optional<uint64_t> ParseStatStartTime(const std::string& stat) {
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  // After "pid (comm) ": state is field 3, starttime field 22.
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(close + 1), ' ', absl::SkipEmpty());
  constexpr size_t kStartTimeIndex = 22 - 3;
  uint64_t start = 0;
  if (fields.size() <= kStartTimeIndex || !absl::SimpleAtoi(fields[kStartTimeIndex], &start)) {
    return std::nullopt;
  }
  return start;
}

std::optional<ProcIdentity> ProcfsKinetoReader::Identity(int32_t pid) const {
  std::optional<std::string> stat = ReadProcFile(absl::StrCat(root_, "/", pid, "/stat"));
  std::optional<std::string> status = ReadProcFile(absl::StrCat(root_, "/", pid, "/status"));
  if (!stat.has_value() || !status.has_value()) return std::nullopt;
  ProcIdentity id;
  std::optional<uint64_t> start = ParseStatStartTime(*stat);
  if (!start.has_value()) return std::nullopt;
  id.start_time = *start;
  bool have_pid = false, have_uid = false;
  for (absl::string_view line : absl::StrSplit(*status, '\n')) {
    if (absl::ConsumePrefix(&line, "NSpid:")) {
      std::vector<absl::string_view> pids =
          absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
      have_pid = !pids.empty() && absl::SimpleAtoi(pids.back(), &id.innermost_pid);
    } else if (absl::ConsumePrefix(&line, "Uid:")) {
      std::vector<absl::string_view> uids =
          absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
      uint32_t uid = 0;
      have_uid = !uids.empty() && absl::SimpleAtoi(uids.front(), &uid);
      id.uid = uid;
    }
  }
  if (!have_uid) return std::nullopt;
  if (!have_pid) id.innermost_pid = pid;  // kernels before 4.1 have no NSpid
  return id;
}

absl::flat_hash_map<std::string, std::string> ProcfsKinetoReader::Environment(int32_t pid) const {
  absl::flat_hash_map<std::string, std::string> found;
  std::optional<std::string> environ = ReadProcFile(absl::StrCat(root_, "/", pid, "/environ"));
  if (!environ.has_value()) return found;
  for (absl::string_view entry : absl::StrSplit(*environ, '\0', absl::SkipEmpty())) {
    const size_t eq = entry.find('=');
    if (eq == absl::string_view::npos) continue;
    absl::string_view key = entry.substr(0, eq);
    for (const char* wanted : kIdentityVariables) {
      if (key == wanted) found[key] = std::string(entry.substr(eq + 1, kMaxValueBytes));
    }
  }
  return found;
}

std::vector<std::string> ProcfsKinetoReader::CommandLine(int32_t pid) const {
  std::vector<std::string> args;
  std::optional<std::string> cmdline = ReadProcFile(absl::StrCat(root_, "/", pid, "/cmdline"));
  if (!cmdline.has_value()) return args;
  for (absl::string_view arg : absl::StrSplit(*cmdline, '\0')) {
    if (args.size() == kMaxCmdlineArgs) break;
    args.emplace_back(arg.substr(0, 4096));
  }
  while (!args.empty() && args.back().empty()) args.pop_back();
  return args;
}

}  // namespace gpuctl::daemon::kineto
