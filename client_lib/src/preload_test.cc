// The real libgpuctl.so, attached with LD_PRELOAD to the sample workload
// (which links only libc), against a fake daemon: the load-time constructor
// starts the agent, the forked worker registers as itself on its first
// annotation, and a capture from the worker comes back with its ranges.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "client_lib/src/fake_daemon_for_test.h"
#include "client_lib/src/fork_safety_for_test.h"
#include "client_lib/src/payload_decoder_for_test.h"
#include "gpuctl/v1/records.h"

extern char** environ;

namespace gpuctl::client {
namespace {

using testing::FakeDaemon;
using testing::kWaitMs;
using testing::TempDir;

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

pid_t SpawnWorkload(const std::string& socket_path, bool fork_worker = true,
                    const std::vector<std::string>& extra_env = {}) {
  std::string preload = GPUCTL_TEST_LIBGPUCTL;
  const std::string first = GPUCTL_TEST_PRELOAD_FIRST;
  if (!first.empty()) preload = first + ":" + preload;
  std::vector<std::string> env_strings = {"LD_PRELOAD=" + preload, "GPUCTL_SOCKET=" + socket_path,
                                          "RANK=5", "ASAN_OPTIONS=detect_leaks=0"};
  env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = GPUCTL_TEST_SAMPLE_WORKLOAD;
  std::vector<std::string> args = {exe, "--steps", "1000000", "--step-ms", "2"};
  if (fork_worker) args.push_back("--fork");
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  // In a process group of its own, so that the workload and its forked
  // worker can be killed together whatever the test's outcome.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), nullptr, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  return rc == 0 ? pid : -1;
}

// Kills a spawned workload's process group when the test ends, failed
// assertions included: left running, it would hold ctest's output pipe
// open until the test's timeout.
class WorkloadGroup {
 public:
  explicit WorkloadGroup(pid_t pid) : pid_(pid) {}
  WorkloadGroup(const WorkloadGroup&) = delete;
  WorkloadGroup& operator=(const WorkloadGroup&) = delete;
  ~WorkloadGroup() {
    if (pid_ <= 0) return;
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }

 private:
  pid_t pid_;
};

TEST(PreloadTest, WorkloadAndItsForkedWorkerRegisterAndCapture) {
  // The workload forks while its agent thread may be allocating.
  if (testing::kForkWhileAllocatingCanHang) {
    GTEST_SKIP() << "fork with threads is not safe under this ASan runtime";
  }
  TempDir dir;
  const std::string path = dir.path() + "/gpuctl.sock";
  FakeDaemon daemon(path);
  const pid_t workload = SpawnWorkload(path);
  ASSERT_GT(workload, 0);
  const WorkloadGroup group(workload);
  pid_t worker = -1;

  // Either process may connect first.
  int parent_conn = -1;
  int worker_conn = -1;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(daemon.Handshake());
    if (daemon.hello().pid == workload) {
      parent_conn = dup(daemon.conn_fd());
      EXPECT_EQ(daemon.hello().rank, 5);
      EXPECT_EQ(daemon.hello().library_version, "0.1.0");
    } else {
      EXPECT_EQ(daemon.hello().ppid, workload);
      worker = daemon.hello().pid;
      worker_conn = dup(daemon.conn_fd());
    }
  }
  ASSERT_GE(parent_conn, 0);
  ASSERT_GT(worker, 0);
  daemon.UseConnection(worker_conn);

  wire::StartCapture start;
  start.trace_id = "preload";
  start.start_time_unix_ns = RealtimeNs();
  start.duration_ns = 500'000'000;
  ASSERT_TRUE(daemon.Send(start));
  ASSERT_TRUE(daemon.ReceiveA<wire::CaptureStarted>().has_value());
  int fd = -1;
  std::optional<wire::CaptureResult> result = daemon.ReceiveA<wire::CaptureResult>(kWaitMs, &fd);
  ASSERT_TRUE(result.has_value());
  ASSERT_GE(fd, 0);
  std::string payload(result->payload_size, '\0');
  ASSERT_EQ(pread(fd, payload.data(), payload.size(), 0), static_cast<ssize_t>(payload.size()));
  close(fd);
  std::optional<testing::DecodedPayload> p = testing::DecodePayload(payload);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->pid, worker);
  EXPECT_FALSE(p->Ranges("dataloader.batch").empty());
  EXPECT_FALSE(p->Ranges("forward").empty());
  EXPECT_FALSE(p->OfKind(2).empty());  // steps

  close(parent_conn);
}

// The exit status of `pid`, or -1 (the process killed) when it has not
// exited within `timeout_ms`.
int WaitExit(pid_t pid, int timeout_ms) {
  const int64_t deadline = RealtimeNs() + int64_t{timeout_ms} * 1'000'000;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (RealtimeNs() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    const timespec pause{0, 10'000'000};
    nanosleep(&pause, nullptr);
  }
  return status;
}

// Container entrypoints drop privileges with setpriv (or gosu, su-exec)
// with LD_PRELOAD inherited. setpriv keeps its capabilities across the uid
// change on its own thread only (PR_SET_KEEPCAPS, capset), then sets the
// gid and clears the groups: glibc repeats each on every thread and aborts
// when the agent's attempt fails where the caller's succeeded.
TEST(PreloadTest, SetprivDroppingPrivilegesRunsTheProgram) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  const std::string setpriv = "/usr/bin/setpriv";
  if (access(setpriv.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << setpriv;
  TempDir dir;
  const std::string path = dir.path() + "/gpuctl.sock";
  FakeDaemon daemon(path);
  std::string preload = GPUCTL_TEST_LIBGPUCTL;
  const std::string first = GPUCTL_TEST_PRELOAD_FIRST;
  if (!first.empty()) preload = first + ":" + preload;
  std::vector<std::string> env_strings = {"LD_PRELOAD=" + preload, "GPUCTL_SOCKET=" + path,
                                          "GPUCTL_ATTACH_DELAY_MS=0", "GPUCTL_QUIET=1",
                                          "ASAN_OPTIONS=detect_leaks=0"};
  std::vector<std::string> args = {setpriv,
                                   "--reuid=65534",
                                   "--regid=65534",
                                   "--clear-groups",
                                   GPUCTL_TEST_SAMPLE_WORKLOAD,
                                   "--steps",
                                   "3",
                                   "--step-ms",
                                   "1"};
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, setpriv.c_str(), nullptr, nullptr, argv.data(), envp.data()), 0);
  const int status = WaitExit(pid, kWaitMs);
  ASSERT_NE(status, -1) << "did not exit in time";
  EXPECT_FALSE(WIFSIGNALED(status)) << "killed by signal " << WTERMSIG(status);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

#ifdef GPUCTL_TEST_FAKE_CUPTI
// The real dlopen path: GPUCTL_CUPTI_PATH names libcupti_fake.so, which
// delivers CUPTI record structs through the library's buffer callbacks.
class PreloadCuptiTest : public ::testing::Test {
 protected:
  std::optional<wire::CaptureResult> Capture(const std::string& scenario, std::string* payload) {
    workload_ = SpawnWorkload(path_, false,
                              {std::string("GPUCTL_CUPTI_PATH=") + GPUCTL_TEST_FAKE_CUPTI,
                               "GPUCTL_FAKE_CUPTI_SCENARIO=" + scenario});
    EXPECT_GT(workload_, 0);
    if (!daemon_.Handshake()) return std::nullopt;
    EXPECT_NE(daemon_.hello().capabilities & wire::kCapabilityCupti, 0u);
    wire::StartCapture start;
    start.trace_id = "cupti";
    start.start_time_unix_ns = RealtimeNs();
    start.duration_ns = 300'000'000;
    if (!daemon_.Send(start)) return std::nullopt;
    int fd = -1;
    std::optional<wire::CaptureResult> result;
    for (int i = 0; i < 2 && !result; ++i) {
      std::optional<testing::Received> received = daemon_.Receive(kWaitMs);
      if (!received) return std::nullopt;
      if (auto* r = std::get_if<wire::CaptureResult>(&received->message)) {
        result = *r;
        fd = received->fd;
      }
    }
    if (result && fd >= 0) {
      payload->assign(result->payload_size, '\0');
      EXPECT_EQ(pread(fd, payload->data(), payload->size(), 0),
                static_cast<ssize_t>(payload->size()));
      close(fd);
    }
    return result;
  }
  void TearDown() override {
    if (workload_ > 0) {
      kill(workload_, SIGKILL);
      int status = 0;
      waitpid(workload_, &status, 0);
    }
  }
  TempDir dir_;
  std::string path_ = dir_.path() + "/gpuctl.sock";
  FakeDaemon daemon_{path_};
  pid_t workload_ = -1;
};

TEST_F(PreloadCuptiTest, PayloadCarriesKernelsFromTheLoadedCupti) {
  std::string payload;
  std::optional<wire::CaptureResult> result = Capture("multi_device", &payload);
  ASSERT_TRUE(result.has_value());
  ASSERT_EQ(result->status, static_cast<int32_t>(wire::CaptureStatus::kOk)) << result->message;
  EXPECT_FALSE(result->host_only);
  std::optional<testing::DecodedPayload> p = testing::DecodePayload(payload);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->version_minor, records::kVersionMinor);
  bool kernel_a = false;
  bool kernel_b = false;
  for (const testing::DecodedEvent& e : p->OfKind(static_cast<uint16_t>(records::Kind::kKernel))) {
    kernel_a = kernel_a || e.name == "fake_kernel_a";
    kernel_b = kernel_b || (e.name == "fake_kernel_b" && e.U32(4) == 1);
  }
  EXPECT_TRUE(kernel_a);
  EXPECT_TRUE(kernel_b);
  EXPECT_EQ(p->OfKind(static_cast<uint16_t>(records::Kind::kDeviceInfo)).size(), 2u);
  std::vector<testing::DecodedEvent> info =
      p->OfKind(static_cast<uint16_t>(records::Kind::kCaptureInfo));
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0].domain, GPUCTL_TEST_FAKE_CUPTI);
  EXPECT_FALSE(p->Ranges("forward").empty());
}

TEST_F(PreloadCuptiTest, AnotherCuptiSubscriberMeansBusy) {
  std::string payload;
  std::optional<wire::CaptureResult> result = Capture("subscriber_conflict", &payload);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->status, static_cast<int32_t>(wire::CaptureStatus::kBusy));
  EXPECT_NE(result->message.find("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"),
            std::string::npos)
      << result->message;
}
#endif

}  // namespace
}  // namespace gpuctl::client
