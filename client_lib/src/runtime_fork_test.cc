// fork(): the child registers as itself on its first API call; the parent's
// connection is untouched.
#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "client_lib/src/fake_daemon_for_test.h"
#include "client_lib/src/runtime.h"

namespace gpuctl::client {
namespace {

using testing::FakeDaemon;
using testing::kWaitMs;
using testing::TempDir;

// pthread_atfork cannot be undone: the handlers follow whichever runtime
// the running test installed, as api.cc does for the real one.
std::atomic<Runtime*> g_runtime{nullptr};

void InstallForkHandlers() {
  static const bool installed = [] {
    // Not analysed, as in api.cc: one handler's locks are released by another.
    pthread_atfork(
        []() GPUCTL_NO_THREAD_SAFETY_ANALYSIS {
          if (Runtime* r = g_runtime.load()) r->PrepareFork();
        },
        []() GPUCTL_NO_THREAD_SAFETY_ANALYSIS {
          if (Runtime* r = g_runtime.load()) r->ParentAfterFork();
        },
        []() GPUCTL_NO_THREAD_SAFETY_ANALYSIS {
          if (Runtime* r = g_runtime.load()) r->ChildAfterFork();
        });
    return true;
  }();
  (void)installed;
}

template <typename Pred>
bool WaitFor(Pred pred, int timeout_ms = kWaitMs) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// The parent forks once its agent is attached and idle in ppoll: forked
// while that thread allocates, a child can hang under some ASan runtimes
// (fork_safety_for_test.h).
bool AgentIdle(Runtime& runtime) {
  return WaitFor([&] { return runtime.connected(); }) &&
         testing::WaitUntilThreadBlockedIn("gpuctl-agent", SYS_ppoll);
}

// What gpuctl_range_push does: fast path on the gate, else the slow path.
void ApiRangePush(Runtime& runtime, const char* name) {
  if (runtime.state().gate.load(std::memory_order_relaxed) == 0) return;
  runtime.MaybeRestartAfterFork();
  runtime.host().Push(name);
}

class RuntimeForkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InstallForkHandlers();
    AgentOptions options;
    options.socket_path = path_;
    options.backoff_initial_ms = 5;
    options.backoff_max_ms = 100;
    options.attach_delay_ms = 0;
    runtime_ = std::make_unique<Runtime>(options, &state_, ProcessEnv());
    g_runtime.store(runtime_.get());
  }
  void TearDown() override {
    runtime_->Shutdown();
    g_runtime.store(nullptr);
  }

  TempDir dir_;
  std::string path_ = dir_.path() + "/gpuctl.sock";
  FakeDaemon daemon_{path_};
  AnnotationState state_;
  std::unique_ptr<Runtime> runtime_;
};

TEST_F(RuntimeForkTest, InitIsIdempotentAndShutdownSaysGoodbye) {
  ASSERT_EQ(runtime_->Init(), 0);
  ASSERT_EQ(runtime_->Init(), 0);
  ASSERT_TRUE(daemon_.Handshake());
  ASSERT_TRUE(WaitFor([&] { return runtime_->connected(); }));
  runtime_->Shutdown();
  std::optional<wire::Goodbye> goodbye = daemon_.ReceiveA<wire::Goodbye>();
  ASSERT_TRUE(goodbye.has_value());
  EXPECT_EQ(goodbye->reason, "shutdown");
  EXPECT_FALSE(runtime_->connected());
  runtime_->Shutdown();  // idempotent
}

TEST_F(RuntimeForkTest, ChildRegistersAsItselfAndParentIsUnaffected) {
  ASSERT_EQ(runtime_->Init(), 0);
  ASSERT_TRUE(daemon_.Handshake());
  ASSERT_TRUE(AgentIdle(*runtime_));
  const int parent_conn = daemon_.conn_fd();
  const int parent_conn_dup = dup(parent_conn);  // survives Accept()'s close below

  const pid_t child = fork();
  if (child == 0) {
    // Only async-signal-safe-ish work and exit codes here: no gtest.
    if (runtime_->connected()) _exit(10);  // the parent's agent is not ours
    if ((state_.gate.load() & kGateRestartAfterFork) == 0) _exit(11);
    ApiRangePush(*runtime_, "first call");  // starts the child's agent
    if (!WaitFor([&] { return runtime_->connected(); })) _exit(12);
    runtime_->Shutdown();
    _exit(0);
  }
  ASSERT_GT(child, 0);

  // The child's own connection, with its own pid.
  FakeDaemon& d = daemon_;
  ASSERT_TRUE(d.Handshake());
  EXPECT_EQ(d.hello().pid, child);
  EXPECT_EQ(d.hello().ppid, getpid());
  EXPECT_TRUE(d.ReceiveA<wire::Goodbye>().has_value());
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);

  // The parent is still connected on its original connection, which the
  // child never wrote to and whose close did not end it.
  EXPECT_TRUE(runtime_->connected());
  EXPECT_EQ(state_.gate.load() & kGateRestartAfterFork, 0u);
  pollfd pfd{parent_conn_dup, POLLIN, 0};
  EXPECT_EQ(poll(&pfd, 1, 200), 0) << "unexpected data or EOF on the parent connection";
  wire::StartCapture start;
  start.trace_id = "parent";
  start.start_time_unix_ns = 0;
  start.duration_ns = 1'000'000;
  std::string bytes;
  wire::Encode(wire::DaemonMessage(start), &bytes);
  ASSERT_EQ(send(parent_conn_dup, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
  ASSERT_EQ(poll(&pfd, 1, kWaitMs), 1);
  std::string reply(wire::kMaxIpcMessageBytes, '\0');
  const ssize_t n = recv(parent_conn_dup, reply.data(), reply.size(), 0);
  ASSERT_GT(n, 0);
  reply.resize(static_cast<size_t>(n));
  wire::ClientMessage message;
  ASSERT_TRUE(wire::Decode(reply, &message));
  ASSERT_TRUE(std::holds_alternative<wire::CaptureStarted>(message));
  EXPECT_EQ(std::get<wire::CaptureStarted>(message).trace_id, "parent");
  close(parent_conn_dup);
}

uint64_t NextStepIn(int page_fd) {
  void* view = mmap(nullptr, steps::kStepPageBytes, PROT_READ, MAP_SHARED, page_fd, 0);
  if (view == MAP_FAILED) return UINT64_MAX;
  uint64_t next = 0;
  std::memcpy(&next, static_cast<char*>(view) + steps::kOffsetNextStep, sizeof(next));
  munmap(view, steps::kStepPageBytes);
  return next;
}

TEST_F(RuntimeForkTest, ChildCountsStepsOnItsOwnPageFromTheInheritedValue) {
  ASSERT_GE(runtime_->step_page_fd(), 0);
  MarkStepN(state_, 41, 1);
  ASSERT_EQ(runtime_->Init(), 0);
  ASSERT_TRUE(daemon_.Handshake());
  const int parent_page = dup(daemon_.hello_fd());
  ASSERT_GE(parent_page, 0);
  EXPECT_EQ(NextStepIn(parent_page), 42u);
  ASSERT_TRUE(AgentIdle(*runtime_));

  const pid_t child = fork();
  if (child == 0) {
    uint64_t last = 0;
    if (!LastMarkedStep(state_, &last) || last != 41) _exit(30);
    for (int i = 0; i < 5; ++i) MarkStep(state_, 2 + i);  // 42..46
    ApiRangePush(*runtime_, "first call");                // starts the child's agent
    if (!WaitFor([&] { return runtime_->connected(); })) _exit(31);
    runtime_->Shutdown();
    _exit(0);
  }
  ASSERT_GT(child, 0);
  ASSERT_TRUE(daemon_.Handshake());
  EXPECT_EQ(daemon_.hello().pid, child);
  EXPECT_TRUE(daemon_.hello().step_counter);
  ASSERT_GE(daemon_.hello_fd(), 0);
  EXPECT_EQ(NextStepIn(daemon_.hello_fd()), 47u);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The child never wrote the parent's page.
  EXPECT_EQ(NextStepIn(parent_page), 42u);
  EXPECT_EQ(MarkStep(state_, 10), 42u);
  EXPECT_EQ(NextStepIn(parent_page), 43u);
  close(parent_page);
}

TEST_F(RuntimeForkTest, ChildOfAProcessWithoutAgentStartsNothing) {
  const pid_t child = fork();
  if (child == 0) {
    if (state_.gate.load() != 0) _exit(20);
    ApiRangePush(*runtime_, "x");
    _exit(runtime_->connected() ? 21 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(daemon_.Accept(200));
}

}  // namespace
}  // namespace gpuctl::client
