#include "daemon/hostctx/recorder.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "daemon/common/clock.h"
#include "daemon/common/testing/fake_clock.h"
#include "daemon/common/testing/fake_task_runner.h"
#include "daemon/hostctx/testing/spin_workload.h"
#include "gtest/gtest.h"

namespace gpuctl::hostctx {
namespace {

using gpuctl::testing::FakeClock;
using gpuctl::testing::FakeTaskRunner;

constexpr int64_t kChildLifetimeNs = 20'000'000'000;

// A child that spins; on a byte from `fork_fd` it forks a spinning worker
// and writes the worker's pid to `report_fd`.
pid_t SpinningChild(int ready_fd, int fork_fd, int report_fd) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const char r = 'r';
  if (write(ready_fd, &r, 1) != 1) _exit(1);
  pollfd p{fork_fd, POLLIN, 0};
  while (poll(&p, 1, 0) == 0) GpuctlHostctxSpinLeaf(200000);
  const pid_t worker = fork();
  if (worker == 0) {
    GpuctlHostctxSpinUntil(testing::MonotonicNowNs() + kChildLifetimeNs);
    _exit(0);
  }
  if (write(report_fd, &worker, sizeof(worker)) != sizeof(worker)) _exit(1);
  GpuctlHostctxNapUntil(testing::MonotonicNowNs() + kChildLifetimeNs, 5);
  _exit(0);
}

template <typename T>
bool ReadWithDeadline(int fd, T* value) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 10000) != 1) return false;
  return read(fd, value, sizeof(T)) == static_cast<ssize_t>(sizeof(T));
}

// Lets real time pass for the perf events while the fake runner's timers
// fire as the same time passes on its clock.
void RunFor(FakeTaskRunner* runner, std::chrono::milliseconds duration) {
  for (auto left = duration; left.count() > 0; left -= std::chrono::milliseconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    runner->AdvanceBy(absl::Milliseconds(20));
  }
}

TEST(HostContextRecorderTest, PollsAndRescansOnItsRunnerUntilFinished) {
  int ready[2];
  int fork_now[2];
  int report[2];
  ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(fork_now, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(report, O_CLOEXEC), 0);
  const pid_t child = SpinningChild(ready[1], fork_now[0], report[1]);
  char byte = 0;
  ASSERT_TRUE(ReadWithDeadline(ready[0], &byte));

  RealClock real_clock;
  FakeClock fake_clock;
  FakeTaskRunner runner(&fake_clock);
  RecorderOptions options;
  options.sampler.frequency_hz = 499;
  options.sampler.ring_pages = 1;  // without the polls it would overflow
  HostContextRecorder recorder(options, &real_clock, &runner);
  const absl::Status started = recorder.Start({child});
  pid_t worker = 0;
  if (started.ok()) {
    EXPECT_EQ(runner.pending_timers(), 2u);  // the poll and the rescan
    RunFor(&runner, std::chrono::milliseconds(300));
    ASSERT_EQ(write(fork_now[1], "f", 1), 1);
    ASSERT_TRUE(ReadWithDeadline(report[0], &worker));
    RunFor(&runner, std::chrono::milliseconds(1000));  // one rescan
  }
  const HostCapture capture = recorder.Finish();
  EXPECT_EQ(runner.pending_timers(), 0u);
  EXPECT_FALSE(recorder.running());
  if (worker > 0) kill(worker, SIGKILL);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  for (int fd : {ready[0], ready[1], fork_now[0], fork_now[1], report[0], report[1]}) close(fd);
  if (absl::IsPermissionDenied(started)) GTEST_SKIP() << started;
  ASSERT_TRUE(started.ok()) << started;

  EXPECT_GT(capture.samples.size(), 10u);
  EXPECT_EQ(capture.corrupt_records, 0u);
  EXPECT_NE(std::find_if(capture.threads.begin(), capture.threads.end(),
                         [&](const SampledThread& t) { return t.pid == worker; }),
            capture.threads.end());
}

TEST(HostContextRecorderTest, DestructionCancelsTheTimers) {
  RealClock real_clock;
  FakeClock fake_clock;
  FakeTaskRunner runner(&fake_clock);
  {
    HostContextRecorder recorder(RecorderOptions(), &real_clock, &runner);
    const absl::Status started = recorder.Start({getpid()});
    if (absl::IsPermissionDenied(started)) GTEST_SKIP() << started;
    ASSERT_TRUE(started.ok()) << started;
    EXPECT_EQ(runner.pending_timers(), 2u);
  }
  EXPECT_EQ(runner.pending_timers(), 0u);
  runner.AdvanceBy(absl::Seconds(5));
}

TEST(HostContextRecorderTest, RejectsAZeroPollInterval) {
  RealClock real_clock;
  FakeClock fake_clock;
  FakeTaskRunner runner(&fake_clock);
  RecorderOptions options;
  options.poll_interval = absl::ZeroDuration();
  HostContextRecorder recorder(options, &real_clock, &runner);
  EXPECT_TRUE(absl::IsInvalidArgument(recorder.Start({getpid()})));
  EXPECT_EQ(runner.pending_timers(), 0u);
  EXPECT_TRUE(recorder.Finish().samples.empty());
}

}  // namespace
}  // namespace gpuctl::hostctx
