#include "client_lib/src/runtime.h"

#include <utility>

namespace gpuctl::client {
#ifdef GPUCTL_HAVE_CUPTI
namespace {

// The real process's CUPTI; the clock is set by the constructor.
cupti::CuptiSource::Deps CuptiDeps(const EnvLookup& env) {
  cupti::CuptiSource::Deps deps;
  deps.load = [](std::string* error) {
    return cupti::LoadCuptiApi(cupti::ProcessLoaderEnvironment(), error);
  };
  deps.process_has_cuda = [] { return cupti::ProcessHasCuda(cupti::ProcessLoaderEnvironment()); };
  deps.probe_devices = [](bool may_initialize) {
    return cupti::ProbeCudaDevices(cupti::ProcessLoaderEnvironment(), may_initialize);
  };
  deps.load_driver = [](std::string* error) {
    return cupti::LoadCudaDriver(cupti::ProcessLoaderEnvironment(), error);
  };
  // An explicit CUPTI is loaded even before the process has loaded CUDA.
  deps.force_load = !env("GPUCTL_CUPTI_PATH").value_or("").empty();
  return deps;
}

cupti::CuptiSource::Deps WithClock(cupti::CuptiSource::Deps deps, Clock* clock) {
  deps.clock = clock;
  return deps;
}

}  // namespace
#endif

AgentOptions Runtime::OptionsFromEnv(const EnvLookup& env) {
  AgentOptions options;
  if (std::optional<std::string> socket = env("GPUCTL_SOCKET"); socket && !socket->empty()) {
    options.socket_path = *socket;
  }
  options.force_inline = env("GPUCTL_FORCE_INLINE").value_or("") == "1";
  options.quiet = env("GPUCTL_QUIET").value_or("") == "1";
  options.debug = env("GPUCTL_DEBUG").value_or("") == "1";
  if (std::optional<std::string> delay = env("GPUCTL_ATTACH_DELAY_MS"); delay && !delay->empty()) {
    // Digits only, at most a minute; anything else keeps the default.
    constexpr int64_t kMaxAttachDelayMs = 60'000;
    int64_t value = 0;
    bool valid = delay->size() <= 5;
    for (const char c : *delay) {
      if (c < '0' || c > '9') valid = false;
      if (valid) value = value * 10 + (c - '0');
    }
    if (valid && value <= kMaxAttachDelayMs) options.attach_delay_ms = value;
  }
  return options;
}

#ifdef GPUCTL_HAVE_CUPTI
// NOLINTNEXTLINE(performance-unnecessary-value-param): the target keeps a copy.
Runtime::Runtime(AgentOptions options, AnnotationState* state, EnvLookup env)
    : Runtime(std::move(options), state, env, CuptiDeps(env)) {}

Runtime::Runtime(AgentOptions options, AnnotationState* state, EnvLookup env,
                 cupti::CuptiSource::Deps cupti_deps)
    : options_(std::move(options)),
      state_(state),
      env_(std::move(env)),
      host_(state, &clock_),
      cupti_(WithClock(std::move(cupti_deps), &clock_)) {
  page_.Install(state_);
  host_.set_range_listener(&cupti_);
}
#else
Runtime::Runtime(AgentOptions options, AnnotationState* state, EnvLookup env)
    : options_(std::move(options)), state_(state), env_(std::move(env)), host_(state, &clock_) {
  page_.Install(state_);
}
#endif

Runtime::~Runtime() {
  Shutdown();
  page_.Uninstall(state_);
}

int Runtime::Init() {
  MutexLock lock(&mu_);
  return InitLocked();
}

int Runtime::InitLocked() {
  if (agent_ != nullptr || exiting_) return agent_ != nullptr ? 0 : -1;
  EnvLookup env = env_;
  AgentOptions options = options_;
  options.step_page_fd = page_.fd();
  auto agent = std::make_unique<Agent>(
      options, &clock_, state_, [env] { return BuildHello(env, "/proc"); },
      std::vector<ActivitySource*>{
          &host_,
#ifdef GPUCTL_HAVE_CUPTI
          &cupti_,
#endif
      });
  std::string error;
  if (!agent->Start(&error)) return -1;
  agent_ = std::move(agent);
  agent_pid_.store(getpid(), std::memory_order_release);
  return 0;
}

void Runtime::Shutdown() {
  MutexLock lock(&mu_);
  // A fork child that shuts down before its first call never starts one.
  state_->gate.fetch_and(~kGateRestartAfterFork, std::memory_order_relaxed);
  if (agent_ == nullptr) return;
  agent_->RequestStop("shutdown");
  agent_->Join();
  agent_.reset();
}

void Runtime::OnProcessExit() {
  MutexLock lock(&mu_);
  exiting_ = true;
  if (agent_ == nullptr) return;
  agent_->RequestStop("process exit");
  if (agent_->WaitStopped(kExitWaitMs)) {
    agent_->Join();
    agent_.reset();
  } else {
    // Still mid-send: leave it. The process is exiting, and the object must
    // stay alive for as long as the thread might run.
    (void)agent_.release();
  }
}

bool Runtime::connected() {
  MutexLock lock(&mu_);
  return agent_ != nullptr && agent_->connected();
}

uint64_t Runtime::handshakes() {
  MutexLock lock(&mu_);
  return agent_ != nullptr ? agent_->handshakes() : 0;
}

void Runtime::OnStepMarked(uint64_t step, int64_t now_ns) {
  if ((state_->gate.load(std::memory_order_relaxed) & kGateStepWatch) != 0) {
    MutexLock lock(&mu_);
    if (agent_ != nullptr) agent_->OnStepMarked(step, now_ns);
  }
  host_.RecordStep(step, now_ns);
}

void Runtime::MaybeRestartAfterFork() {
  if ((state_->gate.load(std::memory_order_relaxed) & kGateRestartAfterFork) == 0) return;
  MutexLock lock(&mu_);
  if ((state_->gate.fetch_and(~kGateRestartAfterFork) & kGateRestartAfterFork) == 0) return;
  InitLocked();
}

void Runtime::PrepareFork() {
  mu_.Lock();
  if (agent_ != nullptr) agent_->LockForFork();
  HostSource::LockRegistryForFork();
}

void Runtime::ParentAfterFork() {
  HostSource::UnlockRegistryForFork();
  if (agent_ != nullptr) agent_->UnlockForFork();
  mu_.Unlock();
}

void Runtime::ChildAfterFork() {
  // Before anything else: the inherited step page is the parent's.
  page_.ReinstallInForkChild(state_);
  // The parent's iteration window (if any) is not the child's.
  state_->gate.fetch_and(~kGateStepWatch, std::memory_order_relaxed);
  host_.ResetInForkChild();
#ifdef GPUCTL_HAVE_CUPTI
  // The parent's CUPTI window (if any) is not the child's either; nothing
  // here calls CUPTI.
  cupti_.ResetInForkChild();
#endif
  HostSource::UnlockRegistryForFork();
  const bool had_agent = agent_ != nullptr;
  if (had_agent) {
    agent_->AbandonInForkChild();
    agent_->UnlockForFork();
    // The parent's agent object: its thread does not exist here, so it is
    // neither joined nor destroyed.
    (void)agent_.release();
  }
  if (had_agent) state_->gate.fetch_or(kGateRestartAfterFork, std::memory_order_relaxed);
  mu_.Unlock();
}

}  // namespace gpuctl::client
