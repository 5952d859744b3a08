#include "daemon/hostctx/process_image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/hostctx/proc_tasks.h"

namespace gpuctl::hostctx {
namespace {

// A process's maps is a line per mapping (a few thousand for a Python
// training process with its libraries): what is beyond is left out.
constexpr size_t kMaxMapsBytes = 16 << 20;
constexpr size_t kMaxProcStatusBytes = 16 << 10;

// Reads a file of unknown size in pieces, up to `max_bytes`.
std::string ReadUpTo(const std::string& path, size_t max_bytes) {
  std::string out;
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return out;
  char buffer[64 << 10];
  while (out.size() < max_bytes) {
    const ssize_t n = read(fd.get(), buffer, std::min(sizeof(buffer), max_bytes - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

// The next field of a maps line (up to a space), consumed.
absl::string_view NextField(absl::string_view* line) {
  *line = absl::StripLeadingAsciiWhitespace(*line);
  const size_t end = std::min(line->find(' '), line->size());
  absl::string_view field = line->substr(0, end);
  line->remove_prefix(end);
  return field;
}

bool ParseMapsLine(absl::string_view line, Mapping* mapping, bool* executable) {
  const absl::string_view range = NextField(&line);
  const absl::string_view permissions = NextField(&line);
  *executable = permissions.size() > 2 && permissions[2] == 'x';
  const absl::string_view offset = NextField(&line);
  const absl::string_view device = NextField(&line);
  const absl::string_view inode = NextField(&line);
  const std::pair<absl::string_view, absl::string_view> bounds = absl::StrSplit(range, '-');
  const std::pair<absl::string_view, absl::string_view> dev = absl::StrSplit(device, ':');
  if (!absl::SimpleHexAtoi(bounds.first, &mapping->start) ||
      !absl::SimpleHexAtoi(bounds.second, &mapping->end) || mapping->end <= mapping->start ||
      !absl::SimpleHexAtoi(offset, &mapping->pgoff) ||
      !absl::SimpleHexAtoi(dev.first, &mapping->dev_major) ||
      !absl::SimpleHexAtoi(dev.second, &mapping->dev_minor) ||
      !absl::SimpleAtoi(inode, &mapping->inode)) {
    return false;
  }
  // The path is the rest, spaces included.
  const absl::string_view path = absl::StripAsciiWhitespace(line);
  if (path != "[vdso]" && (path.empty() || path[0] != '/')) return false;
  mapping->path = std::string(path);
  return true;
}

// The root directory of `pid`, shared with an equal one in `shared_roots`.
std::shared_ptr<const UniqueFd> OpenRoot(const std::string& proc_root, pid_t pid,
                                         std::vector<std::shared_ptr<const UniqueFd>>* shared) {
  const std::string path = absl::StrCat(proc_root, "/", pid, "/root");
  UniqueFd fd(open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  struct stat opened {};
  if (fd.get() < 0 || fstat(fd.get(), &opened) != 0) return nullptr;
  for (const std::shared_ptr<const UniqueFd>& held : *shared) {
    struct stat other {};
    if (fstat(held->get(), &other) == 0 && other.st_dev == opened.st_dev &&
        other.st_ino == opened.st_ino) {
      return held;
    }
  }
  shared->push_back(std::make_shared<const UniqueFd>(std::move(fd)));
  return shared->back();
}

}  // namespace

std::vector<Mapping> ParseMaps(absl::string_view text) {
  std::vector<Mapping> mappings;
  std::vector<bool> executable;
  // Files with code: the others (data files, a dataset's shards, locale
  // archives) name no frame.
  absl::flat_hash_set<std::tuple<uint32_t, uint32_t, uint64_t, absl::string_view>> with_code;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    Mapping mapping;
    bool exec = false;
    if (!ParseMapsLine(line, &mapping, &exec)) continue;
    mappings.push_back(std::move(mapping));
    executable.push_back(exec);
  }
  for (size_t i = 0; i < mappings.size(); ++i) {
    const Mapping& m = mappings[i];
    if (executable[i]) with_code.emplace(m.dev_major, m.dev_minor, m.inode, m.path);
  }
  // Decided before any path moves: the set's keys view them.
  std::vector<bool> keep(mappings.size());
  for (size_t i = 0; i < mappings.size(); ++i) {
    const Mapping& m = mappings[i];
    keep[i] = with_code.contains(
        std::make_tuple(m.dev_major, m.dev_minor, m.inode, absl::string_view(m.path)));
  }
  std::vector<Mapping> kept;
  for (size_t i = 0; i < mappings.size(); ++i) {
    if (keep[i]) kept.push_back(std::move(mappings[i]));
  }
  return kept;
}

uint64_t StartTicksOf(const std::string& proc_root, pid_t pid) {
  const std::string stat =
      ReadSmallFile(absl::StrCat(proc_root, "/", pid, "/stat"), kMaxProcStatusBytes);
  // "pid (comm) S ppid ...": comm may hold spaces and parentheses, so the
  // fields start after the last ')', with the state (the 3rd field).
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  const std::vector<absl::string_view> fields = absl::StrSplit(
      absl::string_view(stat).substr(close + 1), absl::ByAnyChar(" \n"), absl::SkipEmpty());
  uint64_t ticks = 0;
  constexpr size_t kStartTimeField = 22 - 3;
  if (fields.size() <= kStartTimeField || !absl::SimpleAtoi(fields[kStartTimeField], &ticks)) {
    return 0;
  }
  return ticks;
}

pid_t NamespacePid(const std::string& proc_root, pid_t pid) {
  const std::string status =
      ReadSmallFile(absl::StrCat(proc_root, "/", pid, "/status"), kMaxProcStatusBytes);
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, "NSpid:")) continue;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    int value = 0;
    if (!fields.empty() && absl::SimpleAtoi(fields.back(), &value) && value > 0) return value;
  }
  return pid;
}

ProcessImage SnapshotProcess(const std::string& proc_root, pid_t pid, uint64_t time_ns,
                             size_t max_mappings,
                             std::vector<std::shared_ptr<const UniqueFd>>* shared_roots) {
  ProcessImage image;
  image.root = OpenRoot(proc_root, pid, shared_roots);
  image.namespace_pid = NamespacePid(proc_root, pid);
  image.start_ticks = StartTicksOf(proc_root, pid);
  const std::string maps = ReadUpTo(absl::StrCat(proc_root, "/", pid, "/maps"), kMaxMapsBytes);
  if (maps.empty()) return image;
  AddressSpaceChange snapshot;
  snapshot.time_ns = time_ns;
  snapshot.mappings = ParseMaps(maps);
  if (snapshot.mappings.size() > max_mappings) snapshot.mappings.resize(max_mappings);
  image.changes.push_back(std::move(snapshot));
  return image;
}

}  // namespace gpuctl::hostctx
