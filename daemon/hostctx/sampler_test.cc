#include "daemon/hostctx/sampler.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/common/clock.h"
#include "daemon/hostctx/off_cpu.h"
#include "daemon/hostctx/symbolizer.h"
#include "daemon/hostctx/testing/no_frame_pointer_workload.h"
#include "daemon/hostctx/testing/pipe.h"
#include "daemon/hostctx/testing/spin_workload.h"
#include "gtest/gtest.h"

namespace gpuctl::hostctx {
namespace {

using testing::MonotonicNowNs;
using testing::Pipe;
using testing::ReadWithDeadline;

constexpr int64_t kChildLifetimeNs = 20'000'000'000;

template <typename T>
void WriteValue(int fd, T value) {
  ASSERT_EQ(write(fd, &value, sizeof(T)), static_cast<ssize_t>(sizeof(T)));
}

// A forked child running `body`; killed and reaped at the end of the test.
class Child {
 public:
  template <typename Body>
  explicit Child(Body body) {
    pid_ = fork();
    if (pid_ == 0) {
      body();
      _exit(0);
    }
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// A child running `body` once it has told the parent it started; null when
// it never did.
template <typename Body>
std::unique_ptr<Child> ReadyChild(Body body) {
  Pipe ready;
  auto child = std::make_unique<Child>([&] {
    WriteValue(ready.fds[1], 'r');
    body();
  });
  char byte = 0;
  if (!ReadWithDeadline(ready.fds[0], &byte)) return nullptr;
  return child;
}

// Whether `pid` reached an interruptible sleep (state S in
// /proc/<pid>/stat) within 5 s.
bool WaitUntilSleeping(pid_t pid) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < end) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t paren = text.rfind(')');
    if (paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'S') {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// Polls the sampler for `duration` (the capture window itself).
void SampleFor(HostSampler* sampler, std::chrono::milliseconds duration) {
  const auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    sampler->Poll();
  }
}

SamplerOptions TestOptions() {
  SamplerOptions options;
  options.frequency_hz = 499;
  return options;
}

#define START_OR_SKIP(sampler, pids)                                \
  do {                                                              \
    const absl::Status started = (sampler).Start(pids);             \
    if (absl::IsPermissionDenied(started)) GTEST_SKIP() << started; \
    ASSERT_TRUE(started.ok()) << started;                           \
  } while (false)

TEST(HostSamplerTest, SamplesASpinningChildWithItsCallChain) {
  std::unique_ptr<Child> child =
      ReadyChild([] { GpuctlHostctxSpinUntil(MonotonicNowNs() + kChildLifetimeNs); });
  ASSERT_NE(child, nullptr);
  RealClock clock;
  HostSampler sampler(TestOptions(), &clock);
  START_OR_SKIP(sampler, {child->pid()});
  Symbolizer symbolizer;
  ASSERT_TRUE(symbolizer.LoadProcess(child->pid()));
  SampleFor(&sampler, std::chrono::milliseconds(600));
  const HostCapture capture = sampler.Stop();
  EXPECT_FALSE(sampler.running());

  ASSERT_EQ(capture.threads.size(), 1u);
  EXPECT_EQ(capture.threads[0].pid, child->pid());
  EXPECT_EQ(capture.threads[0].tid, child->pid());
  EXPECT_GE(capture.threads[0].opened_ns, capture.start_ns);
  EXPECT_FALSE(capture.threads[0].name.empty());
  EXPECT_EQ(capture.threads[0].name, capture.threads[0].process_name);
  EXPECT_EQ(capture.roots, std::vector<pid_t>{child->pid()});
  EXPECT_EQ(capture.corrupt_records, 0u);
  EXPECT_EQ(capture.error_count, 0u);
  ASSERT_GE(capture.samples.size(), 10u);
  size_t in_leaf = 0;
  size_t with_caller = 0;
  for (const CpuSample& sample : capture.samples) {
    EXPECT_EQ(sample.tid, static_cast<uint32_t>(child->pid()));
    EXPECT_EQ(sample.pid, static_cast<uint32_t>(child->pid()));
    EXPECT_GE(sample.time_ns, capture.start_ns);
    EXPECT_LE(sample.time_ns, capture.stop_ns);
    ASSERT_FALSE(sample.ips.empty());
    if (symbolizer.Symbolize(child->pid(), sample.ips[0], false).function !=
        "GpuctlHostctxSpinLeaf") {
      continue;
    }
    ++in_leaf;
    if (sample.ips.size() > 1 && symbolizer.Symbolize(child->pid(), sample.ips[1], true).function ==
                                     "GpuctlHostctxSpinUntil") {
      ++with_caller;
    }
  }
  EXPECT_GE(in_leaf * 2, capture.samples.size());
  EXPECT_GT(with_caller, 0u);
}

// Code built without frame pointers: the kernel's frame-pointer walk
// loses the callers, DWARF unwinding from the sample's registers and stack
// copy finds Inner <- Middle <- Outer.
TEST(HostSamplerTest, DwarfUnwindingFindsCallersWithoutFramePointers) {
  std::unique_ptr<Child> child =
      ReadyChild([] { GpuctlHostctxNoFpOuter(MonotonicNowNs() + kChildLifetimeNs); });
  ASSERT_NE(child, nullptr);
  RealClock clock;
  SamplerOptions options = TestOptions();
  options.dwarf_unwind = true;
  HostSampler sampler(options, &clock);
  START_OR_SKIP(sampler, {child->pid()});
  Symbolizer symbolizer;
  ASSERT_TRUE(symbolizer.LoadProcess(child->pid()));
  SampleFor(&sampler, std::chrono::milliseconds(600));
  const HostCapture capture = sampler.Stop();
  EXPECT_EQ(capture.corrupt_records, 0u);
  EXPECT_EQ(capture.stacks_dropped, 0u);
  ASSERT_GE(capture.samples.size(), 10u);

  auto names = [&](const std::vector<uint64_t>& chain) {
    std::vector<std::string> out;
    for (size_t i = 0; i < chain.size(); ++i) {
      out.push_back(symbolizer.Symbolize(child->pid(), chain[i], i > 0).function);
    }
    return out;
  };
  size_t in_inner = 0;
  size_t unwound_to_outer = 0;
  size_t fp_to_outer = 0;
  for (const CpuSample& sample : capture.samples) {
    ASSERT_EQ(sample.user_regs.size(), kUnwindRegsCount);
    ASSERT_FALSE(sample.user_stack.empty());
    const std::vector<std::string> unwound = names(symbolizer.Unwind(sample));
    if (unwound.empty() || unwound[0] != "GpuctlHostctxNoFpInner") continue;
    ++in_inner;
    const std::vector<std::string> expected = {"GpuctlHostctxNoFpInner", "GpuctlHostctxNoFpMiddle",
                                               "GpuctlHostctxNoFpOuter"};
    if (unwound.size() > 3 && std::equal(expected.begin(), expected.end(), unwound.begin())) {
      ++unwound_to_outer;
      EXPECT_EQ(BestCallChain(sample, &symbolizer).size(), symbolizer.Unwind(sample).size());
    }
    const std::vector<std::string> walked = names(sample.ips);
    fp_to_outer +=
        std::find(walked.begin(), walked.end(), "GpuctlHostctxNoFpOuter") != walked.end();
  }
  EXPECT_GE(in_inner * 2, capture.samples.size());
  // Every sample in Inner unwinds through Middle and Outer to their callers.
  EXPECT_EQ(unwound_to_outer, in_inner);
  // Without frame pointers the kernel's walk does not get there.
  EXPECT_LT(fp_to_outer * 10, in_inner) << fp_to_outer << " of " << in_inner;
}

// JIT frames of a real runtime: Node with --perf-basic-prof writes
// /tmp/perf-<pid>.map as it compiles, and the sampled frames of a hot
// JavaScript function are named from it.
TEST(HostSamplerTest, NamesJitFramesThroughTheMapNodeWrites) {
  constexpr char kNode[] = "/usr/bin/node";
  if (access(kNode, X_OK) != 0) GTEST_SKIP() << kNode << " is not installed (Debian's nodejs)";
  const char* script =
      "function gpuctlHotJs(n) { let a = 0; for (let i = 0; i < n; i++) a = (a * 31 + i) | 0;"
      " return a; }"
      "const end = Date.now() + 20000; let s = 0;"
      "while (Date.now() < end) s += gpuctlHotJs(100000);";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    execl(kNode, "node", "--perf-basic-prof", "--no-logfile-per-isolate", "--logfile=/dev/null",
          "-e", script, static_cast<char*>(nullptr));
    _exit(127);
  }
  struct Reap {
    pid_t pid;
    ~Reap() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      unlink(("/tmp/perf-" + std::to_string(pid) + ".map").c_str());
    }
  } reap{pid};
  const std::string map_path = "/tmp/perf-" + std::to_string(pid) + ".map";
  bool compiled = false;
  for (int i = 0; i < 200 && !compiled; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream map(map_path);
    const std::string text((std::istreambuf_iterator<char>(map)), std::istreambuf_iterator<char>());
    compiled = text.find("gpuctlHotJs") != std::string::npos;
  }
  ASSERT_TRUE(compiled) << map_path << " never named gpuctlHotJs";
  RealClock clock;
  HostSampler sampler(TestOptions(), &clock);
  START_OR_SKIP(sampler, {pid});
  SampleFor(&sampler, std::chrono::milliseconds(800));
  const HostCapture capture = sampler.Stop();
  Symbolizer symbolizer;
  ASSERT_TRUE(symbolizer.LoadProcess(pid));
  size_t main_thread = 0;
  size_t in_hot = 0;
  for (const CpuSample& sample : capture.samples) {
    if (sample.tid != static_cast<uint32_t>(pid) || sample.ips.empty()) continue;
    ++main_thread;
    const Frame top = symbolizer.Symbolize(pid, sample.ips[0], false);
    if (top.module == "[jit]" && top.function.find("gpuctlHotJs") != std::string::npos) ++in_hot;
  }
  ASSERT_GE(main_thread, 20u);
  EXPECT_GE(in_hot * 2, main_thread) << in_hot << " of " << main_thread;
}

// A copy budget spent: later samples keep their frame-pointer chain only.
TEST(HostSamplerTest, StackCopiesPastTheBudgetAreDroppedAndCounted) {
  std::unique_ptr<Child> child =
      ReadyChild([] { GpuctlHostctxNoFpOuter(MonotonicNowNs() + kChildLifetimeNs); });
  ASSERT_NE(child, nullptr);
  RealClock clock;
  SamplerOptions options = TestOptions();
  options.dwarf_unwind = true;
  options.stack_bytes = 4096;
  options.max_stack_copy_bytes = size_t{3} * 4096;
  HostSampler sampler(options, &clock);
  START_OR_SKIP(sampler, {child->pid()});
  SampleFor(&sampler, std::chrono::milliseconds(300));
  const HostCapture capture = sampler.Stop();
  ASSERT_GE(capture.samples.size(), 10u);
  size_t with_copy = 0;
  size_t copied = 0;
  for (const CpuSample& sample : capture.samples) {
    with_copy += !sample.user_stack.empty();
    copied += sample.user_stack.size();
    EXPECT_FALSE(sample.ips.empty());
  }
  EXPECT_GE(with_copy, 3u);
  EXPECT_LE(copied, options.max_stack_copy_bytes);
  EXPECT_EQ(capture.stacks_dropped, capture.samples.size() - with_copy);
  EXPECT_GT(capture.stacks_dropped, 0u);
}

TEST(HostSamplerTest, RefusesAStackCopyOfAnUnusableSize) {
  RealClock clock;
  for (uint32_t bytes : {0u, 100u, kMaxStackCopyBytes + 8}) {
    SamplerOptions options = TestOptions();
    options.dwarf_unwind = true;
    options.stack_bytes = bytes;
    HostSampler sampler(options, &clock);
    const absl::Status started = sampler.Start({getpid()});
    EXPECT_TRUE(absl::IsInvalidArgument(started)) << bytes << ": " << started;
    EXPECT_FALSE(sampler.running());
  }
}

TEST(HostSamplerTest, ASleepingChildIsOffCpuBlocked) {
  std::unique_ptr<Child> child =
      ReadyChild([] { GpuctlHostctxNapUntil(MonotonicNowNs() + kChildLifetimeNs, 10); });
  ASSERT_NE(child, nullptr);
  RealClock clock;
  HostSampler sampler(TestOptions(), &clock);
  START_OR_SKIP(sampler, {child->pid()});
  SampleFor(&sampler, std::chrono::milliseconds(500));
  const HostCapture capture = sampler.Stop();

  const auto intervals = OffCpuIntervals(capture.switches, capture.start_ns, capture.stop_ns);
  uint64_t blocked_ns = 0;
  size_t blocked = 0;
  for (const OffCpuInterval& interval : intervals) {
    EXPECT_EQ(interval.tid, static_cast<uint32_t>(child->pid()));
    EXPECT_LT(interval.start_ns, interval.end_ns);
    if (interval.reason != OffCpuReason::kBlocked) continue;
    ++blocked;
    blocked_ns += interval.end_ns - interval.start_ns;
  }
  EXPECT_GE(blocked, 10u);
  // Naps of 10 ms with a moment of CPU between them: off the CPU most of it.
  EXPECT_GE(blocked_ns * 2, capture.stop_ns - capture.start_ns);
}

// With switch_stacks each switch-out carries the thread's user chain: the
// naps' intervals name nanosleep's caller.
TEST(HostSamplerTest, ABlockedIntervalCarriesTheChainItBlockedWith) {
  std::unique_ptr<Child> child =
      ReadyChild([] { GpuctlHostctxNapUntil(MonotonicNowNs() + kChildLifetimeNs, 10); });
  ASSERT_NE(child, nullptr);
  RealClock clock;
  SamplerOptions options = TestOptions();
  options.switch_stacks = true;
  HostSampler sampler(options, &clock);
  START_OR_SKIP(sampler, {child->pid()});
  Symbolizer symbolizer;
  ASSERT_TRUE(symbolizer.LoadProcess(child->pid()));
  SampleFor(&sampler, std::chrono::milliseconds(400));
  const HostCapture capture = sampler.Stop();
  if (capture.switch_stack_errors > 0) GTEST_SKIP() << capture.switch_stack_error;

  ASSERT_GE(capture.switch_stacks.size(), 10u);
  EXPECT_TRUE(capture.samples.size() < capture.switch_stacks.size());
  size_t blocked = 0, named = 0;
  for (const OffCpuInterval& interval : OffCpuIntervals(capture)) {
    if (interval.reason != OffCpuReason::kBlocked) continue;
    ++blocked;
    if (interval.stack < 0) continue;
    const CpuSample& stack = capture.switch_stacks[static_cast<size_t>(interval.stack)];
    EXPECT_TRUE(stack.at_switch);
    EXPECT_EQ(stack.tid, interval.tid);
    // The leaf (clock_nanosleep) has no frame: its caller's is found in the
    // stack copy.
    const std::vector<uint64_t> chain = BestCallChain(stack, &symbolizer);
    for (size_t i = 1; i < chain.size() && i < 4; ++i) {
      if (symbolizer.Symbolize(child->pid(), chain[i], true).function == "GpuctlHostctxNapUntil") {
        ++named;
        break;
      }
    }
  }
  EXPECT_GE(blocked, 10u);
  EXPECT_GE(named * 10, blocked * 9) << named << " of " << blocked;
}

// A busy process and a real-time competitor that wakes every 2 ms, both
// pinned to one CPU: the competitor takes the CPU at each wake-up, and
// the busy process's preempted intervals name it, found by the CPU-wide
// switch events of the CPU it may run on. Other tasks of the machine may
// take the CPU too.
TEST(HostSamplerTest, APreemptedIntervalNamesTheCompetitorOnItsCpu) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &mine)) ++cpu;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  Pipe ready;
  Child traced([&] {
    prctl(PR_SET_NAME, "traced");
    sched_setaffinity(0, sizeof(one), &one);
    WriteValue(ready.fds[1], true);
    GpuctlHostctxSpinUntil(MonotonicNowNs() + kChildLifetimeNs);
  });
  Child competitor([&] {
    prctl(PR_SET_NAME, "competitor");
    sched_setaffinity(0, sizeof(one), &one);
    const sched_param fifo{1};
    WriteValue(ready.fds[1], sched_setscheduler(0, SCHED_FIFO, &fifo) == 0);
    const int64_t end = MonotonicNowNs() + kChildLifetimeNs;
    while (MonotonicNowNs() < end) {
      GpuctlHostctxNapUntil(MonotonicNowNs() + 2'000'000, 2);
      GpuctlHostctxSpinUntil(MonotonicNowNs() + 500'000);
    }
  });
  // Each child says it is ready; the competitor, whether it is real-time.
  bool first = false, second = false;
  ASSERT_TRUE(ReadWithDeadline(ready.fds[0], &first));
  ASSERT_TRUE(ReadWithDeadline(ready.fds[0], &second));
  if (!first || !second) GTEST_SKIP() << "SCHED_FIFO refused";
  RealClock clock;
  SamplerOptions options = TestOptions();
  options.cpu_wide_switches = true;
  HostSampler sampler(options, &clock);
  START_OR_SKIP(sampler, {traced.pid()});
  SampleFor(&sampler, std::chrono::milliseconds(500));
  const HostCapture capture = sampler.Stop();
  if (!capture.cpu_wide_error.ok()) GTEST_SKIP() << capture.cpu_wide_error;

  EXPECT_EQ(capture.cpus_watched, 1u);
  ASSERT_FALSE(capture.preemptions.empty());
  for (const CpuSwitch& sw : capture.preemptions) {
    EXPECT_EQ(sw.tid, static_cast<uint32_t>(traced.pid()));
    EXPECT_EQ(sw.cpu, static_cast<uint32_t>(cpu));
  }
  size_t preempted = 0, named = 0, by_competitor = 0;
  for (const OffCpuInterval& interval : OffCpuIntervals(capture)) {
    if (interval.reason != OffCpuReason::kPreempted) continue;
    ++preempted;
    if (interval.preempted_by != 0) ++named;
    EXPECT_NE(interval.preempted_by, static_cast<uint32_t>(traced.pid()));
    if (interval.preempted_by == static_cast<uint32_t>(competitor.pid())) ++by_competitor;
  }
  EXPECT_GE(preempted, 20u);
  EXPECT_GE(named * 10, preempted * 9) << named << " of " << preempted;
  EXPECT_GE(by_competitor * 2, preempted) << by_competitor << " of " << preempted;
  auto name = capture.preemptor_names.find(static_cast<uint32_t>(competitor.pid()));
  ASSERT_NE(name, capture.preemptor_names.end());
  EXPECT_EQ(name->second, "competitor");
}

TEST(HostSamplerTest, AThreadBlockedForTheWholeWindowIsOffCpuThroughout) {
  Pipe ready;
  Pipe never;
  Child child([&] {
    WriteValue(ready.fds[1], 'r');
    char byte = 0;
    ReadWithDeadline(never.fds[0], &byte);  // blocks for 10 s
  });
  char byte = 0;
  ASSERT_TRUE(ReadWithDeadline(ready.fds[0], &byte));
  // Between its write and its poll the child still runs: a switch-out seen
  // in the window would end the interval early.
  ASSERT_TRUE(WaitUntilSleeping(child.pid()));
  RealClock clock;
  HostSampler sampler(TestOptions(), &clock);
  START_OR_SKIP(sampler, {child.pid()});
  SampleFor(&sampler, std::chrono::milliseconds(300));
  const HostCapture capture = sampler.Stop();

  const auto intervals = OffCpuIntervals(capture);
  ASSERT_EQ(intervals.size(), 1u);
  EXPECT_EQ(intervals[0].tid, static_cast<uint32_t>(child.pid()));
  EXPECT_EQ(intervals[0].pid, static_cast<uint32_t>(child.pid()));
  EXPECT_EQ(intervals[0].reason, OffCpuReason::kUnknown);
  EXPECT_EQ(intervals[0].start_ns, capture.threads[0].opened_ns);
  EXPECT_EQ(intervals[0].end_ns, capture.stop_ns);
}

TEST(HostSamplerTest, FollowsForkedWorkersAndSurvivesExitingThreads) {
  Pipe ready;
  Pipe go;
  Pipe end_thread;
  Child child([&] {
    // Spins until told to end, so that it exits inside the window.
    std::thread short_lived([&] {
      pollfd p{end_thread.fds[0], POLLIN, 0};
      while (poll(&p, 1, 0) == 0) GpuctlHostctxSpinLeaf(200000);
    });
    WriteValue(ready.fds[1], 'r');
    char byte = 0;
    if (!ReadWithDeadline(go.fds[0], &byte)) _exit(1);
    short_lived.join();
    const pid_t worker = fork();
    if (worker == 0) {
      GpuctlHostctxSpinUntil(MonotonicNowNs() + kChildLifetimeNs);
      _exit(0);
    }
    WriteValue(ready.fds[1], worker);
    GpuctlHostctxNapUntil(MonotonicNowNs() + kChildLifetimeNs, 5);
  });
  char byte = 0;
  ASSERT_TRUE(ReadWithDeadline(ready.fds[0], &byte));
  RealClock clock;
  HostSampler sampler(TestOptions(), &clock);
  START_OR_SKIP(sampler, {child.pid()});
  SampleFor(&sampler, std::chrono::milliseconds(100));
  WriteValue(end_thread.fds[1], 'e');
  SampleFor(&sampler, std::chrono::milliseconds(100));
  WriteValue(go.fds[1], 'g');
  pid_t worker = 0;
  ASSERT_TRUE(ReadWithDeadline(ready.fds[0], &worker));
  EXPECT_EQ(sampler.Rescan(), 1u);
  EXPECT_EQ(sampler.Rescan(), 0u);
  SampleFor(&sampler, std::chrono::milliseconds(400));
  const HostCapture capture = sampler.Stop();
  kill(worker, SIGKILL);

  EXPECT_EQ(capture.threads.size(), 3u);  // main, the exited thread, the worker
  EXPECT_EQ(capture.error_count, 0u);
  EXPECT_EQ(capture.corrupt_records, 0u);
  const auto worker_thread = std::find_if(capture.threads.begin(), capture.threads.end(),
                                          [&](const SampledThread& t) { return t.tid == worker; });
  ASSERT_NE(worker_thread, capture.threads.end());
  EXPECT_EQ(worker_thread->pid, worker);
  const size_t worker_samples =
      std::count_if(capture.samples.begin(), capture.samples.end(),
                    [&](const CpuSample& s) { return s.pid == static_cast<uint32_t>(worker); });
  EXPECT_GT(worker_samples, 0u);
}

TEST(HostSamplerTest, CapsWhatOneCaptureKeeps) {
  std::unique_ptr<Child> child =
      ReadyChild([] { GpuctlHostctxSpinUntil(MonotonicNowNs() + kChildLifetimeNs); });
  ASSERT_NE(child, nullptr);
  RealClock clock;
  SamplerOptions options = TestOptions();
  options.frequency_hz = 999;
  options.ring_pages = 1;
  options.max_samples = 5;
  HostSampler sampler(options, &clock);
  START_OR_SKIP(sampler, {child->pid()});
  SampleFor(&sampler, std::chrono::milliseconds(400));
  const HostCapture capture = sampler.Stop();
  EXPECT_LE(capture.samples.size(), 5u);
  EXPECT_GT(capture.dropped_samples + capture.lost_records, 0u);
  EXPECT_EQ(capture.corrupt_records, 0u);
}

TEST(HostSamplerTest, ReportsWhatCannotBeSampled) {
  RealClock clock;
  HostSampler gone(TestOptions(), &clock);
  EXPECT_TRUE(absl::IsNotFound(gone.Start({0x3ffffff})));
  EXPECT_FALSE(gone.running());

  SamplerOptions bad = TestOptions();
  bad.ring_pages = 3;
  HostSampler misconfigured(bad, &clock);
  EXPECT_TRUE(absl::IsInvalidArgument(misconfigured.Start({getpid()})));
  bad.ring_pages = 8192;
  HostSampler too_large(bad, &clock);
  EXPECT_TRUE(absl::IsInvalidArgument(too_large.Start({getpid()})));

  HostSampler twice(TestOptions(), &clock);
  const absl::Status started = twice.Start({getpid()});
  if (absl::IsPermissionDenied(started)) GTEST_SKIP() << started;
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_TRUE(absl::IsFailedPrecondition(twice.Start({getpid()})));
  const HostCapture capture = twice.Stop();
  EXPECT_FALSE(capture.threads.empty());
}

TEST(HostSamplerTest, CountsThreadsPastTheCap) {
  Pipe ready;
  Child child([&] {
    std::thread napping([] { GpuctlHostctxNapUntil(MonotonicNowNs() + kChildLifetimeNs, 50); });
    WriteValue(ready.fds[1], 'r');
    GpuctlHostctxNapUntil(MonotonicNowNs() + kChildLifetimeNs, 50);
  });
  char byte = 0;
  ASSERT_TRUE(ReadWithDeadline(ready.fds[0], &byte));
  RealClock clock;
  SamplerOptions options = TestOptions();
  options.max_threads = 1;
  HostSampler sampler(options, &clock);
  START_OR_SKIP(sampler, {child.pid()});
  const HostCapture capture = sampler.Stop();
  EXPECT_EQ(capture.threads.size(), 1u);
  EXPECT_EQ(capture.threads_over_cap, 1u);
}

}  // namespace
}  // namespace gpuctl::hostctx
