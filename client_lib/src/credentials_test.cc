// libgpuctl.so linked into the test program, so its constructor starts the
// agent here: a forked child changes its credentials while its agent
// thread runs, as a program that drops privileges in-process does, and
// exits normally with the new credentials and an agent again.
#include <dirent.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>

#include "client_lib/src/fork_safety_for_test.h"
#include "gpuctl/gpuctl.h"

namespace {

constexpr uid_t kNobody = 65534;
constexpr int kWaitMs = 20'000;

int64_t MonotonicMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

void PauseBriefly() {
  const timespec pause{0, 5'000'000};
  nanosleep(&pause, nullptr);
}

int ThreadCount() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int count = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count;
}

// Whether this process has the agent thread (besides the caller) within
// the deadline.
bool WaitForAgentThread() {
  const int64_t deadline = MonotonicMs() + kWaitMs;
  while (ThreadCount() < 2) {
    if (MonotonicMs() > deadline) return false;
    PauseBriefly();
  }
  return true;
}

// The calling thread's effective capabilities back to its permitted ones
// (what setpriv does after a uid change under PR_SET_KEEPCAPS).
bool RaiseEffectiveCapabilities() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  for (__user_cap_data_struct& d : data) d.effective = d.permitted;
  return syscall(SYS_capset, &header, data) == 0;
}

// The exit status of `pid`, or -1 (the process killed) when it has not
// exited within the deadline.
int WaitExit(pid_t pid) {
  const int64_t deadline = MonotonicMs() + kWaitMs;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (MonotonicMs() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    PauseBriefly();
  }
  return status;
}

// Runs `drop` in a forked child whose agent thread runs; the child exits
// with `drop`'s code, or 10 when it had no agent, 20 when the credentials
// are not nobody's afterwards, 21 when no agent runs again.
template <typename Drop>
int RunInChild(Drop drop) {
  const pid_t child = fork();
  if (child == 0) {
    // The fork child's first call starts its own agent.
    if (gpuctl_init() != 0 || !WaitForAgentThread()) _exit(10);
    const int code = drop();
    if (code != 0) _exit(code);
    if (getuid() != kNobody || geteuid() != kNobody || getgid() != kNobody ||
        getegid() != kNobody || getgroups(0, nullptr) != 0) {
      _exit(20);
    }
    _exit(WaitForAgentThread() ? 0 : 21);
  }
  if (child < 0) return -1;
  return WaitExit(child);
}

void ExpectExitedNormally(int status) {
  ASSERT_NE(status, -1) << "no child, or it did not exit in time";
  EXPECT_FALSE(WIFSIGNALED(status)) << "killed by signal " << WTERMSIG(status);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

class CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    if (gpuctl::client::testing::kForkWhileAllocatingCanHang) {
      GTEST_SKIP() << "fork with threads is not safe under this ASan runtime";
    }
  }
};

// The order gosu and su-exec use.
TEST_F(CredentialsTest, GroupsThenGidThenUid) {
  ExpectExitedNormally(RunInChild([] {
    if (setgroups(0, nullptr) != 0) return 1;
    if (setresgid(kNobody, kNobody, kNobody) != 0) return 2;
    if (setresuid(kNobody, kNobody, kNobody) != 0) return 3;
    return 0;
  }));
}

// setpriv's order: the uid first, its capabilities kept on the calling
// thread only, then the gid and the groups.
TEST_F(CredentialsTest, UidFirstWithCapabilitiesKeptOnTheCallingThread) {
  ExpectExitedNormally(RunInChild([] {
    if (prctl(PR_SET_KEEPCAPS, 1UL, 0UL, 0UL, 0UL) != 0) return 1;
    if (setresuid(kNobody, kNobody, kNobody) != 0) return 2;
    if (!RaiseEffectiveCapabilities()) return 3;
    if (setresgid(kNobody, kNobody, kNobody) != 0) return 4;
    if (setgroups(0, nullptr) != 0) return 5;
    return 0;
  }));
}

// The same through the POSIX calls (setreuid, setregid).
TEST_F(CredentialsTest, SetreuidThenSetregidWithCapabilitiesKept) {
  ExpectExitedNormally(RunInChild([] {
    if (prctl(PR_SET_KEEPCAPS, 1UL, 0UL, 0UL, 0UL) != 0) return 1;
    if (setreuid(kNobody, kNobody) != 0) return 2;
    if (!RaiseEffectiveCapabilities()) return 3;
    if (setregid(kNobody, kNobody) != 0) return 4;
    if (setgroups(0, nullptr) != 0) return 5;
    return 0;
  }));
}

}  // namespace
