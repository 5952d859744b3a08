// Frames of descendants that exit or exec during the window: a compiler
// subprocess, a short DataLoader worker, a forked child that exec's
// another program. The symbolizer runs after the window, when such a
// process is gone: what names its frames is what the capture kept.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "daemon/common/clock.h"
#include "daemon/hostctx/sampler.h"
#include "daemon/hostctx/symbolizer.h"
#include "daemon/hostctx/testing/pipe.h"
#include "daemon/hostctx/testing/spin_workload.h"
#include "gtest/gtest.h"

namespace gpuctl::hostctx {
namespace {

using testing::MonotonicNowNs;
using testing::Pipe;
using testing::ReadWithDeadline;

constexpr int64_t kLifetimeNs = 20'000'000'000;
constexpr int64_t kSpinNs = 400'000'000;

template <typename T>
void WriteOrExit(int fd, T value) {
  if (write(fd, &value, sizeof(T)) != static_cast<ssize_t>(sizeof(T))) _exit(1);
}

// A traced process that, when told, forks a worker running `worker` (it
// reports the worker's pid first), reaps it and reports that it did.
class Parent {
 public:
  template <typename Worker>
  explicit Parent(Worker worker) {
    pid_ = fork();
    if (pid_ != 0) return;
    char byte = 0;
    if (!ReadWithDeadline(go_.fds[0], &byte)) _exit(1);
    const pid_t child = fork();
    if (child == 0) {
      WriteOrExit(report_.fds[1], getpid());
      worker();
      _exit(0);
    }
    waitpid(child, nullptr, 0);
    WriteOrExit(report_.fds[1], pid_t{0});
    GpuctlHostctxNapUntil(MonotonicNowNs() + kLifetimeNs, 5);
    _exit(0);
  }
  ~Parent() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  Parent(const Parent&) = delete;
  Parent& operator=(const Parent&) = delete;

  pid_t pid() const { return pid_; }
  // Tells it to fork; the worker's pid.
  pid_t ForkWorker() {
    EXPECT_EQ(write(go_.fds[1], "g", 1), 1);
    pid_t worker = 0;
    return ReadWithDeadline(report_.fds[0], &worker) ? worker : 0;
  }
  // Polls `sampler` until the worker was reaped.
  bool PollUntilReaped(HostSampler* sampler) {
    pid_t done = -1;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < end) {
      sampler->Poll();
      pollfd p{report_.fds[0], POLLIN, 0};
      if (poll(&p, 1, 20) == 1) return ReadWithDeadline(report_.fds[0], &done) && done == 0;
    }
    return false;
  }

 private:
  Pipe go_;
  Pipe report_;
  pid_t pid_ = -1;
};

// The sampled capture of `parent` while its worker lives and a little
// after; the worker is gone when it returns. `rescan`: /proc is scanned
// for it at once (else only its fork record finds it).
HostCapture CaptureWorker(Parent* parent, pid_t* worker, bool rescan = true) {
  RealClock clock;
  SamplerOptions options;
  options.frequency_hz = 499;
  HostSampler sampler(options, &clock);
  const absl::Status started = sampler.Start({parent->pid()});
  EXPECT_TRUE(started.ok()) << started;
  if (!started.ok()) return {};
  *worker = parent->ForkWorker();
  EXPECT_GT(*worker, 0);
  if (rescan) {
    EXPECT_EQ(sampler.Rescan(), 1u);
  }
  EXPECT_TRUE(parent->PollUntilReaped(&sampler));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  sampler.Poll();
  EXPECT_EQ(kill(*worker, 0), -1);  // gone before anything is named
  return sampler.Stop();
}

// The innermost frame of each of `pid`'s samples, named as the trace
// conversion does: in the address space of the sample's time.
std::vector<std::pair<uint32_t, std::string>> TopFrames(const HostCapture& capture, pid_t pid,
                                                        Symbolizer* symbolizer) {
  std::vector<std::pair<uint32_t, std::string>> out;
  for (const CpuSample& sample : capture.samples) {
    if (sample.pid != static_cast<uint32_t>(pid) || sample.ips.empty()) continue;
    const uint32_t space = symbolizer->AddressSpaceAt(pid, sample.time_ns);
    out.emplace_back(space, symbolizer->Symbolize(pid, space, sample.ips[0], false).function);
  }
  return out;
}

TEST(ShortLivedSymbolsTest, AWorkerThatExitedInsideTheWindowKeepsItsNames) {
  Parent parent([] { GpuctlHostctxSpinUntil(MonotonicNowNs() + kSpinNs); });
  pid_t worker = 0;
  HostCapture capture = CaptureWorker(&parent, &worker);
  ASSERT_TRUE(capture.images.contains(worker));
  EXPECT_EQ(capture.dropped_mappings, 0u);
  Symbolizer symbolizer("/proc", std::move(capture.images));
  size_t in_leaf = 0;
  const auto frames = TopFrames(capture, worker, &symbolizer);
  for (const auto& frame : frames) in_leaf += frame.second == "GpuctlHostctxSpinLeaf";
  ASSERT_GE(frames.size(), 20u);
  EXPECT_GE(in_leaf * 2, frames.size()) << in_leaf << " of " << frames.size();
}

// A worker shorter than the recorder's rescan interval (1 s): its fork
// record opens it at the next poll.
TEST(ShortLivedSymbolsTest, AWorkerIsFollowedFromItsForkWithoutARescan) {
  Parent parent([] { GpuctlHostctxSpinUntil(MonotonicNowNs() + kSpinNs); });
  pid_t worker = 0;
  HostCapture capture = CaptureWorker(&parent, &worker, /*rescan=*/false);
  EXPECT_TRUE(std::any_of(capture.threads.begin(), capture.threads.end(),
                          [&](const SampledThread& t) { return t.tid == worker; }));
  Symbolizer symbolizer("/proc", std::move(capture.images));
  size_t in_leaf = 0;
  const auto frames = TopFrames(capture, worker, &symbolizer);
  for (const auto& frame : frames) in_leaf += frame.second == "GpuctlHostctxSpinLeaf";
  ASSERT_GE(frames.size(), 20u);
  EXPECT_GE(in_leaf * 2, frames.size()) << in_leaf << " of " << frames.size();
}

TEST(ShortLivedSymbolsTest, AWorkerThatExecdIsNamedInEachProgram) {
  Parent parent([] {
    GpuctlHostctxSpinUntil(MonotonicNowNs() + kSpinNs / 2);
    const std::string ms = std::to_string(kSpinNs / 1'000'000);
    execl(GPUCTL_HOSTCTX_EXEC_WORKLOAD, GPUCTL_HOSTCTX_EXEC_WORKLOAD, ms.c_str(), nullptr);
    _exit(127);
  });
  pid_t worker = 0;
  HostCapture capture = CaptureWorker(&parent, &worker);
  ASSERT_TRUE(capture.images.contains(worker));
  Symbolizer symbolizer("/proc", std::move(capture.images));
  size_t before = 0;
  size_t before_named = 0;
  size_t after = 0;
  size_t after_named = 0;
  for (const auto& frame : TopFrames(capture, worker, &symbolizer)) {
    if (frame.first == 0) {
      ++before;
      before_named += frame.second == "GpuctlHostctxSpinLeaf";
    } else {
      EXPECT_EQ(frame.first, 1u);
      ++after;
      after_named += frame.second == "GpuctlHostctxExecedSpin";
    }
  }
  // Its track is named by the program it exec'd (a comm: 15 characters).
  const auto thread = std::find_if(capture.threads.begin(), capture.threads.end(),
                                   [&](const SampledThread& t) { return t.tid == worker; });
  ASSERT_NE(thread, capture.threads.end());
  EXPECT_EQ(thread->process_name, "gpuctl_hostctx_");
  EXPECT_EQ(thread->name, "gpuctl_hostctx_");
  ASSERT_GE(before, 10u);
  ASSERT_GE(after, 20u);
  EXPECT_GE(before_named * 2, before) << before_named << " of " << before;
  EXPECT_GE(after_named * 2, after) << after_named << " of " << after;
}

}  // namespace
}  // namespace gpuctl::hostctx
