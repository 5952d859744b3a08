// Everything one process's library instance owns: the step counter page,
// the host and CUPTI sources and the agent. api.cc holds one, created on
// first use and never destroyed (threads may still run during exit); tests
// make their own.
//
// Threads: every method may be called from any thread. Fork handlers must
// be wired to pthread_atfork by the owner (api.cc does).
#ifndef GPUCTL_CLIENT_LIB_SRC_RUNTIME_H_
#define GPUCTL_CLIENT_LIB_SRC_RUNTIME_H_

#include <errno.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <memory>

#include "client_lib/src/agent.h"
#include "client_lib/src/annotation_state.h"
#include "client_lib/src/clock.h"
#include "client_lib/src/host_source.h"
#include "client_lib/src/mutex.h"
#include "client_lib/src/process_identity.h"
#include "client_lib/src/step_counter_page.h"
#ifdef GPUCTL_HAVE_CUPTI
#include "client_lib/src/cupti/cupti_source.h"
#endif

namespace gpuctl::client {

class Runtime {
 public:
  // How long process exit waits for the agent to say Goodbye.
  static constexpr int kExitWaitMs = 250;

  // Reads GPUCTL_SOCKET and GPUCTL_FORCE_INLINE from `env`.
  static AgentOptions OptionsFromEnv(const EnvLookup& env);

  // `state` must outlive the runtime. The runtime moves the state's step
  // counter onto a shared page (StepCounterPage) and, when destroyed, back;
  // no thread may mark steps across either.
  Runtime(AgentOptions options, AnnotationState* state, EnvLookup env);
#ifdef GPUCTL_HAVE_CUPTI
  // With the CUPTI source's dependencies given (tests: the fake CUPTI); its
  // clock is the runtime's.
  Runtime(AgentOptions options, AnnotationState* state, EnvLookup env,
          cupti::CuptiSource::Deps cupti_deps);
#endif
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Starts the agent (idempotent). Returns 0, or -1 when it cannot start.
  int Init();
  // Stops the agent: Goodbye, close, join (idempotent).
  void Shutdown();
  // Process exit: Goodbye if connected, waiting at most kExitWaitMs; the
  // thread is left running (never joined) if it does not finish in time.
  void OnProcessExit();
  bool connected();

  // Slow path of every API call: in a fork child whose parent ran an agent,
  // the first call starts the child's own.
  void MaybeRestartAfterFork();

  // Slow path of gpuctl_step/gpuctl_step_n (gate non-zero): the mark of
  // `step` at `now_ns`, the counters already updated. An iteration window
  // sees it first (it may open or close right here), then the host source
  // records it if a window is open.
  void OnStepMarked(uint64_t step, int64_t now_ns);

  // Runs `change`, a credential change (set*id, setgroups), with no agent
  // thread in the process; a running agent is stopped first and a new one,
  // with the caller's credentials, started afterwards. glibc makes every
  // thread repeat such a change and aborts the process when one thread's
  // result differs from the caller's, and per-thread state that the caller
  // changed alone (PR_SET_KEEPCAPS and capset, as setpriv does) would make
  // the agent's differ. Returns what `change` returns, its errno kept. In a
  // process that is not the agent's (a vfork child) it only calls `change`.
  template <typename Change>
  int WithoutAgent(Change change) {
    if (getpid() != agent_pid_.load(std::memory_order_acquire)) return change();
    MutexLock lock(&mu_);
    const bool had_agent = agent_ != nullptr;
    if (had_agent) {
      agent_->RequestStop("credential change");
      agent_->Join();
      agent_.reset();
    }
    const int result = change();
    const int saved_errno = errno;
    if (had_agent) {
      try {
        InitLocked();
      } catch (...) {
        // Out of memory: no agent; the process goes on.
      }
    }
    errno = saved_errno;
    return result;
  }

  HostSource& host() { return host_; }
#ifdef GPUCTL_HAVE_CUPTI
  cupti::CuptiSource& cupti() { return cupti_; }
#endif
  // The shared step page's descriptor; -1 when the counter is private.
  int step_page_fd() const { return page_.fd(); }
  AnnotationState& state() { return *state_; }
  // Handshakes of the current agent (tests); 0 when none.
  uint64_t handshakes();

  void PrepareFork() GPUCTL_ACQUIRE(mu_, HostSource::RegistryMutex());
  void ParentAfterFork() GPUCTL_RELEASE(mu_, HostSource::RegistryMutex());
  void ChildAfterFork() GPUCTL_RELEASE(mu_, HostSource::RegistryMutex());

 private:
  int InitLocked() GPUCTL_REQUIRES(mu_);

  const AgentOptions options_;
  AnnotationState* const state_;
  const EnvLookup env_;
  RealClock clock_;
  StepCounterPage page_;  // replaced in a fork child only
  HostSource host_;
#ifdef GPUCTL_HAVE_CUPTI
  cupti::CuptiSource cupti_;
#endif
  Mutex mu_;
  std::unique_ptr<Agent> agent_ GPUCTL_GUARDED_BY(mu_);
  bool exiting_ GPUCTL_GUARDED_BY(mu_) = false;
  // The process the current agent was started in (0: none yet).
  std::atomic<pid_t> agent_pid_{0};
};

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_RUNTIME_H_
