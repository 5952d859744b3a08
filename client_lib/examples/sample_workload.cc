// A stand-in for a training loop, annotated with the gpuctl API. It links
// only libc: the API is looked up at run time, so the same binary runs
// plain (annotations are no-ops) or under LD_PRELOAD=libgpuctl.so.
//
//   gpuctl_sample_workload [--steps N] [--step-ms M] [--fork] [--start-step S]
//                          [--spawn-workers N] [--helpers N] [--announce]
//                          [--stall-at-step N --stall-ms M]
//
// --steps N          run N steps, then exit (default: forever)
// --step-ms M        target wall time of one step (default 20)
// --fork             also fork a worker process that annotates (a
//                    DataLoader-like child)
// --start-step S     number the steps S, S+1, ... (gpuctl_step_n) instead of
//                    letting the library count from 0 (gpuctl_step)
// --spawn-workers N  launcher mode, as torchrun: fork and exec this program N
//                    times with RANK=i, LOCAL_RANK=i, WORLD_SIZE=N and the
//                    other arguments, forward SIGTERM/SIGINT to them, wait
//                    for them; the launcher itself does not step
// --helpers N        each worker forks N helper processes that annotate a
//                    range every few ms until their worker exits
// --announce         print this process's role line (implied by the two
//                    options above, and given to spawned workers)
// --stall-at-step N  the step with loop index N (the N+1-th step, whatever
// --stall-ms M       --start-step says) waits M ms more, in 50 ms ranges
//                    named "stall" (a straggler, for anomaly rules); it
//                    prints "stall step=<step number> pid=<pid>" when it
//                    begins
//
// Every process prints "gpuctl_sample_workload pid=<pid> libgpuctl=<loaded|
// absent>" first. With a process tree each also prints its role, flushed at
// once so a test can find it: "launcher pid=<pid>", "worker pid=<pid>
// rank=<rank>" (-1 without RANK) or "helper pid=<pid> parent=<pid>".
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gpuctl/gpuctl.h"

extern char** environ;

namespace {

struct Api {
  decltype(&gpuctl_range_push) range_push = nullptr;
  decltype(&gpuctl_range_pop) range_pop = nullptr;
  decltype(&gpuctl_step) step = nullptr;
  decltype(&gpuctl_step_n) step_n = nullptr;
};

struct Options {
  int64_t steps = -1;
  int64_t step_ms = 20;
  bool fork_worker = false;
  bool numbered = false;  // --start-step given
  uint64_t start_step = 0;
  int64_t spawn_workers = 0;
  int64_t helpers = 0;
  bool announce = false;
  int64_t stall_at = -1;  // loop index of the slow step; -1: none
  int64_t stall_ms = 0;
  std::vector<std::string> worker_args;  // everything but --spawn-workers N
};

template <typename Fn>
Fn Lookup(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));  // NOLINT: dlsym gives void*
}

Api LoadApi() {
  Api api;
  api.range_push = Lookup<decltype(api.range_push)>("gpuctl_range_push");
  api.range_pop = Lookup<decltype(api.range_pop)>("gpuctl_range_pop");
  api.step = Lookup<decltype(api.step)>("gpuctl_step");
  api.step_n = Lookup<decltype(api.step_n)>("gpuctl_step_n");
  return api;
}

void Push(const Api& api, const char* name) {
  if (api.range_push != nullptr) api.range_push(name);
}
void Pop(const Api& api) {
  if (api.range_pop != nullptr) api.range_pop();
}

int64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Burns CPU for about `ns` so ranges have visible width.
void Work(int64_t ns) {
  volatile uint64_t sink = 0;
  const int64_t until = NowNs() + ns;
  while (NowNs() < until) {
    for (int i = 0; i < 1000; ++i) sink = sink * 6364136223846793005ULL + 1;
  }
}

void Phase(const Api& api, const char* name, int64_t ns) {
  Push(api, name);
  Work(ns);
  Pop(api);
}

// The slow step: --stall-ms of waiting in 50 ms ranges named "stall", as a
// rank polling for a straggler would, announced first.
void Stall(const Api& api, const Options& o, int64_t index) {
  const uint64_t step =
      o.numbered ? o.start_step + static_cast<uint64_t>(index) : static_cast<uint64_t>(index);
  printf("stall step=%" PRIu64 " pid=%d\n", step, static_cast<int>(getpid()));
  fflush(stdout);
  const int64_t until = NowNs() + o.stall_ms * 1'000'000;
  for (int64_t now = NowNs(); now < until; now = NowNs()) {
    const int64_t ns = std::min<int64_t>(50'000'000, until - now);
    // NOLINTNEXTLINE(google-runtime-int): tv_nsec is a long.
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    Push(api, "stall");
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    Pop(api);
  }
}

void RunSteps(const Api& api, const Options& o, const char* prefix) {
  const int64_t step_ns = o.step_ms * 1'000'000;
  for (int64_t i = 0; o.steps < 0 || i < o.steps; ++i) {
    if (o.numbered) {
      if (api.step_n != nullptr) api.step_n(o.start_step + static_cast<uint64_t>(i));
    } else if (api.step != nullptr) {
      api.step();
    }
    Push(api, prefix);
    if (i == o.stall_at && o.stall_ms > 0) Stall(api, o, i);
    Phase(api, "forward", step_ns * 4 / 10);
    Push(api, "backward");
    Phase(api, "backward.grad", step_ns * 3 / 10);
    Pop(api);
    Phase(api, "optimizer", step_ns * 2 / 10);
    Pop(api);
  }
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (strcmp(argv[i], "--spawn-workers") == 0 && has_value) {
      o->spawn_workers = strtol(argv[++i], nullptr, 10);
      continue;
    }
    o->worker_args.push_back(argv[i]);
    if (strcmp(argv[i], "--steps") == 0 && has_value) {
      o->steps = strtol(argv[++i], nullptr, 10);
    } else if (strcmp(argv[i], "--step-ms") == 0 && has_value) {
      o->step_ms = strtol(argv[++i], nullptr, 10);
    } else if (strcmp(argv[i], "--start-step") == 0 && has_value) {
      o->numbered = true;
      o->start_step = strtoull(argv[++i], nullptr, 10);
    } else if (strcmp(argv[i], "--stall-at-step") == 0 && has_value) {
      o->stall_at = strtol(argv[++i], nullptr, 10);
    } else if (strcmp(argv[i], "--stall-ms") == 0 && has_value) {
      o->stall_ms = strtol(argv[++i], nullptr, 10);
    } else if (strcmp(argv[i], "--helpers") == 0 && has_value) {
      o->helpers = strtol(argv[++i], nullptr, 10);
    } else if (strcmp(argv[i], "--fork") == 0) {
      o->fork_worker = true;
      continue;
    } else if (strcmp(argv[i], "--announce") == 0) {
      o->announce = true;
      continue;
    } else {
      return false;
    }
    o->worker_args.push_back(argv[i]);
  }
  if (o->step_ms < 1) o->step_ms = 1;
  return o->spawn_workers >= 0 && o->helpers >= 0;
}

// ---- Launcher: children to signal, kept where a handler can read them.
constexpr int kMaxWorkers = 256;
pid_t g_workers[kMaxWorkers];
volatile sig_atomic_t g_worker_count = 0;
volatile sig_atomic_t g_forwarded = 0;

void ForwardSignal(int sig) {
  g_forwarded = sig;
  for (int i = 0; i < g_worker_count; ++i) kill(g_workers[i], sig);
}

// The environment of worker `rank`: ours without the distributed variables,
// then RANK, LOCAL_RANK and WORLD_SIZE. Built before fork: the child only
// calls execve.
std::vector<std::string> WorkerEnv(int64_t rank, int64_t world) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("RANK=", 0) == 0 || entry.rfind("LOCAL_RANK=", 0) == 0 ||
        entry.rfind("WORLD_SIZE=", 0) == 0) {
      continue;
    }
    env.push_back(entry);
  }
  env.push_back("RANK=" + std::to_string(rank));
  env.push_back("LOCAL_RANK=" + std::to_string(rank));
  env.push_back("WORLD_SIZE=" + std::to_string(world));
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int RunLauncher(const Options& o, char* argv0) {
  if (o.spawn_workers > kMaxWorkers) {
    fprintf(stderr, "--spawn-workers: at most %d\n", kMaxWorkers);
    return 2;
  }
  printf("launcher pid=%d\n", static_cast<int>(getpid()));
  fflush(stdout);
  struct sigaction forward {};
  forward.sa_handler = ForwardSignal;
  sigemptyset(&forward.sa_mask);
  sigaction(SIGTERM, &forward, nullptr);
  sigaction(SIGINT, &forward, nullptr);

  std::vector<std::string> args = {argv0, "--announce"};
  args.insert(args.end(), o.worker_args.begin(), o.worker_args.end());
  std::vector<char*> child_argv = Pointers(args);
  // Blocked while a worker is forked and recorded, so a forwarded signal
  // reaches every worker there is.
  sigset_t forwarded;
  sigset_t previous;
  sigemptyset(&forwarded);
  sigaddset(&forwarded, SIGTERM);
  sigaddset(&forwarded, SIGINT);
  for (int64_t rank = 0; rank < o.spawn_workers && g_forwarded == 0; ++rank) {
    std::vector<std::string> env = WorkerEnv(rank, o.spawn_workers);
    std::vector<char*> child_env = Pointers(env);
    sigprocmask(SIG_BLOCK, &forwarded, &previous);
    const pid_t pid = fork();
    if (pid == 0) {
      signal(SIGTERM, SIG_DFL);  // the handler is the launcher's
      signal(SIGINT, SIG_DFL);
      sigprocmask(SIG_SETMASK, &previous, nullptr);
      execve("/proc/self/exe", child_argv.data(), child_env.data());
      _exit(127);
    }
    if (pid > 0) {
      g_workers[g_worker_count] = pid;
      g_worker_count = g_worker_count + 1;
    }
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    if (pid < 0) {
      perror("fork");
      break;
    }
  }
  bool all_ok = true;
  for (int reaped = 0; reaped < g_worker_count;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;
    ++reaped;
    all_ok = all_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (g_forwarded != 0) {
    // End the way the signal would have ended us.
    signal(g_forwarded, SIG_DFL);
    raise(g_forwarded);
  }
  return all_ok ? 0 : 1;
}

// ---- Helpers: DataLoader-like children of a worker.
[[noreturn]] void RunHelper(const Api& api, pid_t worker) {
  // Dies with its worker; the worker may already be gone.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != worker) _exit(0);
  printf("helper pid=%d parent=%d\n", static_cast<int>(getpid()), static_cast<int>(worker));
  fflush(stdout);
  const timespec pause{0, 3'000'000};
  while (getppid() == worker) {
    Push(api, "helper.batch");  // the first call attaches this process
    Work(200'000);
    Pop(api);
    nanosleep(&pause, nullptr);
  }
  _exit(0);
}

std::vector<pid_t> StartHelpers(const Api& api, int64_t count) {
  std::vector<pid_t> helpers;
  const pid_t self = getpid();
  for (int64_t i = 0; i < count; ++i) {
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) RunHelper(api, self);
    if (pid > 0) helpers.push_back(pid);
  }
  return helpers;
}

int RankFromEnv() {
  const char* rank = getenv("RANK");
  if (rank == nullptr || *rank == '\0') return -1;
  char* end = nullptr;
  const int64_t value = strtol(rank, &end, 10);
  return *end == '\0' && value >= 0 && value <= 0x7fffffff ? static_cast<int>(value) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    fprintf(stderr,
            "usage: %s [--steps N] [--step-ms M] [--fork] [--start-step S] "
            "[--spawn-workers N] [--helpers N] [--announce] "
            "[--stall-at-step N --stall-ms M]\n",
            argv[0]);
    return 2;
  }
  const Api api = LoadApi();
  printf("gpuctl_sample_workload pid=%d libgpuctl=%s\n", static_cast<int>(getpid()),
         api.range_push != nullptr ? "loaded" : "absent");
  fflush(stdout);
  if (o.spawn_workers > 0) return RunLauncher(o, argv[0]);

  if (o.announce || o.helpers > 0) {
    printf("worker pid=%d rank=%d\n", static_cast<int>(getpid()), RankFromEnv());
    fflush(stdout);
  }
  const std::vector<pid_t> helpers = StartHelpers(api, o.helpers);

  pid_t worker = -1;
  if (o.fork_worker) {
    fflush(stdout);
    worker = fork();
    if (worker == 0) {
      RunSteps(api, o, "dataloader.batch");
      _exit(0);
    }
  }
  RunSteps(api, o, "train.step");
  if (worker > 0) {
    if (o.steps < 0) kill(worker, SIGTERM);
    waitpid(worker, nullptr, 0);
  }
  for (pid_t helper : helpers) kill(helper, SIGTERM);
  for (pid_t helper : helpers) waitpid(helper, nullptr, 0);
  return 0;
}
