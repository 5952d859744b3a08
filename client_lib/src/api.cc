// The exported C API (gpuctl/gpuctl.h), the load-time constructor that
// starts the agent under LD_PRELOAD, the exit hook and the fork handlers.
#include <pthread.h>

#include <cstdlib>
#include <cstring>

#include "client_lib/src/annotation_state.h"
#include "client_lib/src/clock.h"
#include "client_lib/src/runtime.h"
#include "gpuctl/gpuctl.h"

namespace gpuctl::client {
namespace {

// Constant-initialized: valid before any constructor runs (steps are
// counted in its private counters until the runtime moves them to the
// shared page).
constinit AnnotationState g_state;
std::atomic<Runtime*> g_runtime{nullptr};

// Not analysed: the locks the prepare handler takes are released by the
// parent's or the child's, in another call.
void ForkPrepare() GPUCTL_NO_THREAD_SAFETY_ANALYSIS {
  if (Runtime* r = g_runtime.load(std::memory_order_acquire)) r->PrepareFork();
}
void ForkParent() GPUCTL_NO_THREAD_SAFETY_ANALYSIS {
  if (Runtime* r = g_runtime.load(std::memory_order_acquire)) r->ParentAfterFork();
}
void ForkChild() GPUCTL_NO_THREAD_SAFETY_ANALYSIS {
  if (Runtime* r = g_runtime.load(std::memory_order_acquire)) r->ChildAfterFork();
}

Runtime& GetRuntime() {
  // Never destroyed: the agent thread may outlive static destruction.
  static Runtime* const runtime = [] {
    auto* r = new Runtime(Runtime::OptionsFromEnv(ProcessEnv()), &g_state, ProcessEnv());
    g_runtime.store(r, std::memory_order_release);
    pthread_atfork(&ForkPrepare, &ForkParent, &ForkChild);
    return r;
  }();
  return *runtime;
}

// Every API call but the annotation fast paths passes here.
Runtime& RuntimeForCall() {
  Runtime& runtime = GetRuntime();
  runtime.MaybeRestartAfterFork();
  return runtime;
}

__attribute__((noinline)) void SlowPush(const char* name) { RuntimeForCall().host().Push(name); }
__attribute__((noinline)) void SlowPop() { RuntimeForCall().host().Pop(); }
__attribute__((noinline)) void SlowStep(uint64_t step, int64_t now_ns) {
  RuntimeForCall().OnStepMarked(step, now_ns);
}

__attribute__((constructor)) void OnLoad() {
  const char* disable = getenv("GPUCTL_DISABLE");
  if (disable != nullptr && std::strcmp(disable, "1") == 0) return;
  GetRuntime().Init();
}

__attribute__((destructor)) void OnUnload() {
  if (Runtime* r = g_runtime.load(std::memory_order_acquire)) r->OnProcessExit();
}

}  // namespace
}  // namespace gpuctl::client

using gpuctl::client::g_state;

extern "C" {

int gpuctl_init(void) { return gpuctl::client::RuntimeForCall().Init(); }

void gpuctl_shutdown(void) { gpuctl::client::GetRuntime().Shutdown(); }

void gpuctl_range_push(const char* name) {
  if (__builtin_expect(g_state.gate.load(std::memory_order_relaxed) == 0, 1)) return;
  gpuctl::client::SlowPush(name);
}

void gpuctl_range_pop(void) {
  if (__builtin_expect(g_state.gate.load(std::memory_order_relaxed) == 0, 1)) return;
  gpuctl::client::SlowPop();
}

// The mark always lands on the step counter (the shared page, read by the
// daemon): relaxed atomics and a vDSO clock read, no lock, no system call.
void gpuctl_step(void) {
  const int64_t now = gpuctl::client::ReadClockNs(CLOCK_REALTIME);
  const uint64_t step = gpuctl::client::MarkStep(g_state, now);
  if (__builtin_expect(g_state.gate.load(std::memory_order_relaxed) == 0, 1)) return;
  gpuctl::client::SlowStep(step, now);
}

void gpuctl_step_n(uint64_t step) {
  const int64_t now = gpuctl::client::ReadClockNs(CLOCK_REALTIME);
  gpuctl::client::MarkStepN(g_state, step, now);
  if (__builtin_expect(g_state.gate.load(std::memory_order_relaxed) == 0, 1)) return;
  gpuctl::client::SlowStep(step, now);
}

const char* gpuctl_version(void) {
  gpuctl::client::RuntimeForCall();
  return GPUCTL_VERSION;
}

int gpuctl_connected(void) { return gpuctl::client::RuntimeForCall().connected() ? 1 : 0; }

// CUDA_INJECTION64_PATH=libgpuctl.so: libcuda loads the library during
// cuInit (its constructor has already started the agent) and calls this.
// Returning 1 tells the driver the injection succeeded.
__attribute__((visibility("default"))) int InitializeInjection(void) {
  const char* disable = getenv("GPUCTL_DISABLE");
  if (disable != nullptr && std::strcmp(disable, "1") == 0) return 1;
  gpuctl::client::RuntimeForCall().Init();
  return 1;
}

}  // extern "C"
