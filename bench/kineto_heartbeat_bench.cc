// The daemon's cost per kineto heartbeat with many registered processes:
// N processes (a /proc of N entries in a temporary directory, read as the
// bridge reads the real one) registered with the real bridge and core,
// then heartbeats round-robin through KinetoBridge::OnDatagram, as the
// socket hands them over. Prints the mean CPU time per heartbeat.
//
//   gpuctl_kineto_heartbeat_bench [PROCESSES] [HEARTBEATS]   (1000, 200000)
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "daemon/common/log.h"
#include "daemon/common/testing/fake_clock.h"
#include "daemon/common/testing/fake_task_runner.h"
#include "daemon/core/peer_router.h"
#include "daemon/kineto/kineto_bridge.h"
#include "daemon/kineto/testing/fake_kineto_proc.h"
#include "daemon/store/local_store.h"

namespace {

using namespace gpuctl::daemon;          // NOLINT
using namespace gpuctl::daemon::kineto;  // NOLINT

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  const int processes = argc > 1 ? atoi(argv[1]) : 1000;
  const int heartbeats = argc > 2 ? atoi(argv[2]) : 200000;
  gpuctl::SetMinLogLevel(gpuctl::LogLevel::kWarning);
  std::string dir = "/tmp/gpuctl-kbench-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return 1;
  gpuctl::testing::FakeClock clock;
  gpuctl::testing::FakeTaskRunner loop(&clock);
  gpuctl::testing::ManualExecutor worker;
  testing::FakeKinetoProc proc(dir + "/proc");
  ProcfsKinetoReader reader(proc.root());
  auto store = *LocalTraceStore::Create(dir + "/traces");
  CoreOptions core_options;
  core_options.hostname = "bench";
  core_options.proc_root = proc.root();
  core_options.attach_log_settle = absl::ZeroDuration();
  PeerRouter router;
  auto core = DaemonCore::Create(core_options, {&clock, &loop, &worker, store.get(), &router});
  KinetoBridgeOptions options;
  options.hostname = "bench";
  options.proc_root = proc.root();
  options.max_processes = static_cast<size_t>(processes);
  KinetoBridge bridge(options, {&clock, &loop, &worker, core.get(), &reader});
  router.set_kineto(&bridge);
  for (int i = 0; i < processes; ++i) {
    testing::FakeKinetoProc::Process p;
    p.pid = 100000 + i;
    p.env = {{"GPUCTL_JOB_ID", "bench"}, {"RANK", std::to_string(i)}};
    proc.Add(p);
  }
  auto beat = [&](int i) {
    KinetoRequest request;
    request.type = 3;
    request.pids = {100000 + i, 1};
    bridge.OnDatagram({.pid = 100000 + i, .uid = getuid()}, request, KinetoSocket::kAbstract);
  };
  for (int i = 0; i < processes; ++i) beat(i);
  // Registration reads each process on the worker, then registers it on
  // the loop.
  while (loop.RunUntilIdle() + worker.RunAll() > 0) {
  }
  const double start = CpuSeconds();
  for (int n = 0; n < heartbeats; ++n) {
    beat(n % processes);
    if (n % processes == 0) clock.Advance(absl::Milliseconds(5));
  }
  const double spent = CpuSeconds() - start;
  std::printf("%zu processes registered, %d heartbeats: %.2f us CPU per heartbeat\n", bridge.size(),
              heartbeats, spent / heartbeats * 1e6);
  std::printf("at a 5s poll period: %.4f%% of one core\n",
              spent / heartbeats * processes / 5.0 * 100.0);
  std::filesystem::remove_all(dir);
  return bridge.size() == static_cast<size_t>(processes) ? 0 : 1;
}
