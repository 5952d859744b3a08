#include "daemon/hostctx/proc_tasks.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace gpuctl::hostctx {
namespace {

class FakeProc {
 public:
  FakeProc() {
    std::string pattern = ::testing::TempDir() + "/proc.XXXXXX";
    root_ = mkdtemp(pattern.data());
  }
  ~FakeProc() { std::filesystem::remove_all(root_); }
  void Add(pid_t pid, pid_t ppid, const std::string& comm, const std::vector<pid_t>& threads) {
    const std::string dir = absl::StrCat(root_, "/", pid);
    std::filesystem::create_directories(dir + "/task");
    std::ofstream(dir + "/stat") << pid << " (" << comm << ") S " << ppid << " 1 1 0";
    for (pid_t tid : threads) std::filesystem::create_directories(absl::StrCat(dir, "/task/", tid));
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(ProcTasksTest, FindsDescendantsAndThreads) {
  FakeProc proc;
  proc.Add(1, 0, "init", {1});
  proc.Add(100, 1, "python (train) x", {100, 101});
  proc.Add(200, 100, "pt_data_worker", {200});
  proc.Add(300, 200, "cc1plus", {300});
  proc.Add(400, 1, "other", {400});
  auto pids = ProcessesWithDescendants(proc.root(), {100});
  ASSERT_EQ(pids.size(), 3u);
  EXPECT_EQ(pids[0], 100);
  std::sort(pids.begin(), pids.end());
  EXPECT_EQ(pids, (std::vector<pid_t>{100, 200, 300}));
  auto threads = ThreadsOf(proc.root(), 100);
  std::sort(threads.begin(), threads.end());
  EXPECT_EQ(threads, (std::vector<pid_t>{100, 101}));
  EXPECT_EQ(ParentOf(proc.root(), 100), 1);
  EXPECT_TRUE(ThreadsOf(proc.root(), 999).empty());
  EXPECT_EQ(ParentOf(proc.root(), 999), -1);
}

TEST(ProcTasksTest, ReadsTheRealProc) {
  const auto threads = ThreadsOf("/proc", getpid());
  EXPECT_NE(std::find(threads.begin(), threads.end(), getpid()), threads.end());
  EXPECT_EQ(ParentOf("/proc", getpid()), getppid());
}

}  // namespace
}  // namespace gpuctl::hostctx
