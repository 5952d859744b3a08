// A stand-in for a training loop, annotated with the gpuctl API. It links
// only libc: the API is looked up at run time, so the same binary runs
// plain (annotations are no-ops) or under LD_PRELOAD=libgpuctl.so.
//
//   gpuctl_sample_workload [--steps N] [--step-ms M] [--fork]
//
// --steps N   run N steps, then exit (default: forever)
// --step-ms M target wall time of one step (default 20)
// --fork      also fork a worker process that annotates (a DataLoader-like
//             child)
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpuctl/gpuctl.h"

namespace {

struct Api {
  decltype(&gpuctl_range_push) range_push = nullptr;
  decltype(&gpuctl_range_pop) range_pop = nullptr;
  decltype(&gpuctl_step) step = nullptr;
};

template <typename Fn>
Fn Lookup(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

Api LoadApi() {
  Api api;
  api.range_push = Lookup<decltype(api.range_push)>("gpuctl_range_push");
  api.range_pop = Lookup<decltype(api.range_pop)>("gpuctl_range_pop");
  api.step = Lookup<decltype(api.step)>("gpuctl_step");
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

void RunSteps(const Api& api, long steps, long step_ms, const char* prefix) {
  const int64_t step_ns = step_ms * 1'000'000;
  for (long i = 0; steps < 0 || i < steps; ++i) {
    if (api.step != nullptr) api.step();
    Push(api, prefix);
    Phase(api, "forward", step_ns * 4 / 10);
    Push(api, "backward");
    Phase(api, "backward.grad", step_ns * 3 / 10);
    Pop(api);
    Phase(api, "optimizer", step_ns * 2 / 10);
    Pop(api);
  }
}

}  // namespace

int main(int argc, char** argv) {
  long steps = -1;
  long step_ms = 20;
  bool fork_worker = false;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = strtol(argv[++i], nullptr, 10);
    } else if (strcmp(argv[i], "--step-ms") == 0 && i + 1 < argc) {
      step_ms = strtol(argv[++i], nullptr, 10);
    } else if (strcmp(argv[i], "--fork") == 0) {
      fork_worker = true;
    } else {
      fprintf(stderr, "usage: %s [--steps N] [--step-ms M] [--fork]\n", argv[0]);
      return 2;
    }
  }
  if (step_ms < 1) step_ms = 1;
  const Api api = LoadApi();
  printf("gpuctl_sample_workload pid=%d libgpuctl=%s\n", static_cast<int>(getpid()),
         api.range_push != nullptr ? "loaded" : "absent");
  fflush(stdout);

  pid_t worker = -1;
  if (fork_worker) {
    worker = fork();
    if (worker == 0) {
      RunSteps(api, steps, step_ms, "dataloader.batch");
      _exit(0);
    }
  }
  RunSteps(api, steps, step_ms, "train.step");
  if (worker > 0) {
    if (steps < 0) kill(worker, SIGTERM);
    waitpid(worker, nullptr, 0);
  }
  return 0;
}
