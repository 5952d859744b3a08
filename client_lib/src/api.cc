// The exported C API (gpuctl/gpuctl.h), the load-time constructor that
// starts the agent under LD_PRELOAD, the exit hook, the fork handlers and
// the credential changes that must not meet the agent thread.
#include <dlfcn.h>
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <type_traits>

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

// libc's definitions of the credential changes libgpuctl.so interposes.
struct CredentialCalls {
  int (*setuid)(uid_t);
  int (*setgid)(gid_t);
  int (*seteuid)(uid_t);
  int (*setegid)(gid_t);
  int (*setreuid)(uid_t, uid_t);
  int (*setregid)(gid_t, gid_t);
  int (*setresuid)(uid_t, uid_t, uid_t);
  int (*setresgid)(gid_t, gid_t, gid_t);
  int (*setgroups)(size_t, const gid_t*);
  int (*initgroups)(const char*, gid_t);
};

template <typename Fn>
Fn Next(const char* name) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): dlsym's result.
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// Resolved at load (a fork child must not need the dynamic loader).
const CredentialCalls& Real() {
  static const CredentialCalls calls{
      Next<decltype(CredentialCalls::setuid)>("setuid"),
      Next<decltype(CredentialCalls::setgid)>("setgid"),
      Next<decltype(CredentialCalls::seteuid)>("seteuid"),
      Next<decltype(CredentialCalls::setegid)>("setegid"),
      Next<decltype(CredentialCalls::setreuid)>("setreuid"),
      Next<decltype(CredentialCalls::setregid)>("setregid"),
      Next<decltype(CredentialCalls::setresuid)>("setresuid"),
      Next<decltype(CredentialCalls::setresgid)>("setresgid"),
      Next<decltype(CredentialCalls::setgroups)>("setgroups"),
      Next<decltype(CredentialCalls::initgroups)>("initgroups"),
  };
  return calls;
}

// `real(args...)` with no agent thread in the process (Runtime::WithoutAgent).
template <typename... Args>
int ChangeCredentials(int (*real)(Args...), std::type_identity_t<Args>... args) {
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  Runtime* const runtime = g_runtime.load(std::memory_order_acquire);
  if (runtime == nullptr) return real(args...);
  return runtime->WithoutAgent([&] { return real(args...); });
}

__attribute__((constructor)) void OnLoad() {
  (void)Real();
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

// Credential changes: libc's, with no agent thread in the process meanwhile
// (exported under libc's symbol version: libgpuctl_libc.map).
__attribute__((visibility("default"))) int setuid(uid_t uid) noexcept {
  return gpuctl::client::ChangeCredentials(gpuctl::client::Real().setuid, uid);
}
__attribute__((visibility("default"))) int setgid(gid_t gid) noexcept {
  return gpuctl::client::ChangeCredentials(gpuctl::client::Real().setgid, gid);
}
__attribute__((visibility("default"))) int seteuid(uid_t uid) noexcept {
  return gpuctl::client::ChangeCredentials(gpuctl::client::Real().seteuid, uid);
}
__attribute__((visibility("default"))) int setegid(gid_t gid) noexcept {
  return gpuctl::client::ChangeCredentials(gpuctl::client::Real().setegid, gid);
}
__attribute__((visibility("default"))) int setreuid(uid_t ruid, uid_t euid) noexcept {
  return gpuctl::client::ChangeCredentials(gpuctl::client::Real().setreuid, ruid, euid);
}
__attribute__((visibility("default"))) int setregid(gid_t rgid, gid_t egid) noexcept {
  return gpuctl::client::ChangeCredentials(gpuctl::client::Real().setregid, rgid, egid);
}
__attribute__((visibility("default"))) int setresuid(uid_t ruid, uid_t euid, uid_t suid) noexcept {
  return gpuctl::client::ChangeCredentials(gpuctl::client::Real().setresuid, ruid, euid, suid);
}
__attribute__((visibility("default"))) int setresgid(gid_t rgid, gid_t egid, gid_t sgid) noexcept {
  return gpuctl::client::ChangeCredentials(gpuctl::client::Real().setresgid, rgid, egid, sgid);
}
__attribute__((visibility("default"))) int setgroups(size_t size, const gid_t* list) noexcept {
  return gpuctl::client::ChangeCredentials(gpuctl::client::Real().setgroups, size, list);
}
__attribute__((visibility("default"))) int initgroups(const char* user, gid_t group) {
  return gpuctl::client::ChangeCredentials(gpuctl::client::Real().initgroups, user, group);
}

}  // extern "C"
