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

// A launcher traced with its worker, which is traced too: the launcher's
// recording leaves the worker and the worker's own children to the
// worker's.
TEST(ProcTasksTest, AProcessRecordedApartIsLeftOutWithItsDescendants) {
  FakeProc proc;
  proc.Add(1, 0, "init", {1});
  proc.Add(100, 1, "torchrun", {100});
  proc.Add(150, 100, "compile", {150});
  proc.Add(200, 100, "python", {200, 201});
  proc.Add(300, 200, "pt_data_worker", {300});
  auto launcher = ProcessesWithDescendants(proc.root(), {100}, {200, 999});
  std::sort(launcher.begin(), launcher.end());
  EXPECT_EQ(launcher, (std::vector<pid_t>{100, 150}));
  auto worker = ProcessesWithDescendants(proc.root(), {200}, {100});
  std::sort(worker.begin(), worker.end());
  EXPECT_EQ(worker, (std::vector<pid_t>{200, 300}));
  // A process asked for is recorded even when also listed apart.
  auto both = ProcessesWithDescendants(proc.root(), {200}, {200});
  std::sort(both.begin(), both.end());
  EXPECT_EQ(both, (std::vector<pid_t>{200, 300}));
}

TEST(ProcTasksTest, ReadsTheRealProc) {
  const auto threads = ThreadsOf("/proc", getpid());
  EXPECT_NE(std::find(threads.begin(), threads.end(), getpid()), threads.end());
  EXPECT_EQ(ParentOf("/proc", getpid()), getppid());
}

}  // namespace
}  // namespace gpuctl::hostctx
