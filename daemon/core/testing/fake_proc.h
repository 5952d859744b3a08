#ifndef GPUCTL_DAEMON_CORE_TESTING_FAKE_PROC_H_
#define GPUCTL_DAEMON_CORE_TESTING_FAKE_PROC_H_

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/proc_reader.h"
#include "gtest/gtest.h"

namespace gpuctl::testing {

// A fake procfs in a temporary directory, with a stat file per process:
// "<pid> (<comm>) S <ppid> ...". Removed with the object.
class FakeProc {
 public:
  FakeProc() : root_(absl::StrCat(::testing::TempDir(), "/registry_stat_", getpid(), "_", ++n_)) {
    std::filesystem::create_directories(root_);
  }
  ~FakeProc() { std::filesystem::remove_all(root_); }
  void Add(int pid, int ppid, const std::string& comm = "python3") {
    std::filesystem::create_directories(absl::StrCat(root_, "/", pid));
    std::ofstream(absl::StrCat(root_, "/", pid, "/stat"))
        << pid << " (" << comm << ") S " << ppid << " " << pid << " 0 0 -1 4194560\n";
  }
  const std::string& root() const { return root_; }

 private:
  static inline int n_ = 0;
  std::string root_;
};

// A process table in memory: what a test sets is what the registry reads.
class FakeProcReader final : public daemon::ProcReader {
 public:
  void SetParent(int32_t pid, int32_t ppid) { parents_[pid] = ppid; }
  void SetInnermostPid(int32_t pid, int64_t innermost) { innermost_[pid] = innermost; }

  std::optional<int64_t> InnermostPid(int32_t pid) const override {
    auto it = innermost_.find(pid);
    if (it == innermost_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<int32_t> ParentPid(int32_t pid) const override {
    auto it = parents_.find(pid);
    if (it == parents_.end()) return std::nullopt;
    return it->second;
  }

 private:
  absl::flat_hash_map<int32_t, int32_t> parents_;
  absl::flat_hash_map<int32_t, int64_t> innermost_;
};

}  // namespace gpuctl::testing

#endif  // GPUCTL_DAEMON_CORE_TESTING_FAKE_PROC_H_
