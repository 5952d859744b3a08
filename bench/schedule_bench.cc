// The daemon's cost of scheduled sampling, on a fake clock: what deciding
// one slot costs with N attached processes (grouped in jobs of 8 ranks),
// and the CPU of a whole simulated hour (decisions, capture requests,
// traces timing out since nothing answers them, manifests written).
//
//   gpuctl_schedule_bench [processes=1000] [minutes=60]
//
// Times are this thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so a busy
// machine does not inflate them.
#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/common/testing/fake_clock.h"
#include "daemon/common/testing/fake_task_runner.h"
#include "daemon/core/daemon_core.h"
#include "daemon/core/testing/fake_peer_channel.h"
#include "daemon/scheduler/schedule_driver.h"
#include "daemon/scheduler/slot_decision.h"
#include "daemon/store/local_store.h"

namespace gpuctl::daemon::scheduler {
namespace {

using ::gpuctl::testing::FakeClock;
using ::gpuctl::testing::FakePeerChannel;
using ::gpuctl::testing::FakeTaskRunner;
using ::gpuctl::testing::ManualExecutor;

constexpr int kRanksPerJob = 8;

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

ScheduleOptions Schedule() {
  ScheduleRule rule;
  rule.name = "minutely";
  rule.selector.mutable_labels()->insert({"team", "ml"});
  rule.probability = 0.05;
  rule.period = absl::Minutes(1);
  rule.window = absl::Seconds(5);
  return ScheduleOptions{.seed = "bench", .rules = {rule}, .max_duty_cycle = 1};
}

void Attach(DaemonCore& core, int processes) {
  for (int i = 0; i < processes; ++i) {
    v1::ipc::Hello hello;
    hello.set_protocol_major(1);
    hello.set_pid(10000 + i);
    hello.set_job_id(absl::StrCat("job-", i / kRanksPerJob));
    hello.set_rank(i % kRanksPerJob);
    hello.set_world_size(kRanksPerJob);
    hello.add_labels("team=ml");
    hello.set_protocol_minor(1);
    absl::Status st =
        core.OnPeerHello(static_cast<PeerId>(i) + 1, {10000 + i, 1000, 1000}, hello, nullptr);
    if (!st.ok()) {
      std::fprintf(stderr, "attach failed: %s\n", st.ToString().c_str());
      std::exit(1);
    }
  }
}

// Scheduled traces started: every rank of a sampled job gets a StartCapture.
size_t Captures(FakePeerChannel& peers) {
  size_t starts = 0;
  for (const auto& sent : peers.sent()) starts += sent.message.has_start_capture() ? 1 : 0;
  return starts / kRanksPerJob;
}

int Run(int processes, int minutes) {
  SetMinLogLevel(LogLevel::kWarning);
  std::string dir = (std::filesystem::temp_directory_path() / "gpuctl-schedule-bench-XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) return 1;
  FakeClock clock(absl::FromUnixSeconds(1764633600));  // 2025-12-02T00:00:00Z
  FakeTaskRunner loop(&clock);
  ManualExecutor worker;
  FakePeerChannel peers;
  std::unique_ptr<LocalTraceStore> store = *LocalTraceStore::Create(dir + "/traces");
  CoreOptions options;
  options.hostname = "bench";
  options.attach_log_settle = absl::ZeroDuration();
  options.proc_root = dir + "/no-proc";
  std::unique_ptr<DaemonCore> core =
      DaemonCore::Create(options, {&clock, &loop, &worker, store.get(), &peers});
  Attach(*core, processes);
  loop.RunUntilIdle();
  const ScheduleOptions schedule = Schedule();
  ScheduleDriver driver(schedule, {.clock = &clock,
                                   .loop = &loop,
                                   .core = core.get(),
                                   .free_store_bytes = [] { return uint64_t{1} << 40; },
                                   .on_decision = {}});
  const absl::Duration period = schedule.rules[0].period;
  const double start = ThreadCpuSeconds();
  driver.Start();
  std::vector<double> decisions;
  for (int m = 0; m < minutes; ++m) {
    // Up to the next boundary, then the boundary's decision alone.
    const absl::Time boundary = SlotStart(period, SlotOf(period, clock.Now()) + 1);
    loop.AdvanceBy(boundary - clock.Now() - absl::Nanoseconds(1));
    while (worker.RunAll() + loop.RunUntilIdle() > 0) {
    }
    const double before = ThreadCpuSeconds();
    loop.AdvanceBy(absl::Nanoseconds(1));
    decisions.push_back(ThreadCpuSeconds() - before);
  }
  const double total = ThreadCpuSeconds() - start;
  std::sort(decisions.begin(), decisions.end());
  double sum = 0;
  for (double d : decisions) sum += d;
  std::printf(
      "processes=%d jobs=%d minutes=%d scheduled traces=%zu wakeups=%llu\n"
      "decision per slot: mean %.1f us, median %.1f us, max %.1f us\n"
      "simulated %d min: %.3f s CPU in all (%.2f ms per simulated minute)\n",
      processes, (processes + kRanksPerJob - 1) / kRanksPerJob, minutes, Captures(peers),
      static_cast<unsigned long long>(driver.wakeups()),
      1e6 * sum / static_cast<double>(decisions.size()), 1e6 * decisions[decisions.size() / 2],
      1e6 * decisions.back(), minutes, total, 1e3 * total / minutes);
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace gpuctl::daemon::scheduler

int main(int argc, char** argv) {
  const int processes = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int minutes = argc > 2 ? std::atoi(argv[2]) : 60;
  if (processes < 1 || minutes < 1) {
    std::fprintf(stderr, "usage: gpuctl_schedule_bench [processes=1000] [minutes=60]\n");
    return 2;
  }
  return gpuctl::daemon::scheduler::Run(processes, minutes);
}
