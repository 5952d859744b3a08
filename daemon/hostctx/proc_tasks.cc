#include "daemon/hostctx/proc_tasks.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <deque>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gpuctl::hostctx {
namespace {

constexpr size_t kMaxStatBytes = 4096;

// The numeric entries of a directory.
std::vector<pid_t> NumericEntries(const std::string& dir_path) {
  std::vector<pid_t> out;
  DIR* dir = opendir(dir_path.c_str());
  if (dir == nullptr) return out;
  while (const dirent* entry = readdir(dir)) {
    int value = 0;
    if (absl::SimpleAtoi(entry->d_name, &value) && value > 0) out.push_back(value);
  }
  closedir(dir);
  return out;
}

}  // namespace

std::string ReadSmallFile(const std::string& path, size_t max_bytes) {
  std::string out;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  out.resize(max_bytes);
  size_t filled = 0;
  while (filled < max_bytes) {
    const ssize_t n = read(fd, out.data() + filled, max_bytes - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    filled += static_cast<size_t>(n);
  }
  close(fd);
  out.resize(filled);
  return out;
}

pid_t ParentOf(const std::string& proc_root, pid_t pid) {
  const std::string stat = ReadSmallFile(absl::StrCat(proc_root, "/", pid, "/stat"), kMaxStatBytes);
  // "pid (comm) S ppid ...": comm may hold spaces and parentheses, so the
  // fields start after the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 4 >= stat.size()) return -1;
  absl::string_view rest = absl::string_view(stat).substr(close + 4);
  rest = rest.substr(0, rest.find(' '));
  int ppid = 0;
  if (!absl::SimpleAtoi(rest, &ppid) || ppid < 0) return -1;
  return ppid;
}

std::vector<pid_t> ProcessesWithDescendants(const std::string& proc_root,
                                            const std::vector<pid_t>& pids,
                                            const std::vector<pid_t>& excluded) {
  absl::flat_hash_map<pid_t, std::vector<pid_t>> children;
  for (pid_t candidate : NumericEntries(proc_root)) {
    const pid_t parent = ParentOf(proc_root, candidate);
    if (parent > 0) children[parent].push_back(candidate);
  }
  std::vector<pid_t> out;
  // Marked seen, an excluded process is never reached as a descendant.
  absl::flat_hash_set<pid_t> seen(excluded.begin(), excluded.end());
  for (pid_t pid : pids) seen.erase(pid);
  std::deque<pid_t> queue(pids.begin(), pids.end());
  while (!queue.empty()) {
    const pid_t pid = queue.front();
    queue.pop_front();
    if (!seen.insert(pid).second) continue;
    out.push_back(pid);
    if (auto it = children.find(pid); it != children.end()) {
      queue.insert(queue.end(), it->second.begin(), it->second.end());
    }
  }
  return out;
}

std::vector<pid_t> ThreadsOf(const std::string& proc_root, pid_t pid) {
  return NumericEntries(absl::StrCat(proc_root, "/", pid, "/task"));
}

}  // namespace gpuctl::hostctx
