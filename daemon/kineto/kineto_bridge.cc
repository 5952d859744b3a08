// The kineto bridge's registry side: datagrams, registration, heartbeats
// and expiry. kineto_bridge_capture.cc holds the captures.
#include "daemon/kineto/kineto_bridge.h"

#include <algorithm>
#include <variant>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/core/hello_validation.h"
#include "daemon/core/proto_time.h"
#include "daemon/core/selector.h"

namespace gpuctl::daemon::kineto {
namespace {

// A process the core refused is offered again after this.
constexpr absl::Duration kRefusalHold = absl::Seconds(30);
constexpr size_t kMaxRefusals = 4096;
// The shortest and longest poll period believed from two heartbeats.
constexpr absl::Duration kMinPeriod = absl::Milliseconds(100);
constexpr absl::Duration kMaxPeriod = absl::Minutes(10);

int32_t RankVariable(const absl::flat_hash_map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  int32_t value = -1;
  if (it == env.end() || !absl::SimpleAtoi(it->second, &value) || value < 0) return -1;
  return value;
}

std::string JobId(const absl::flat_hash_map<std::string, std::string>& env, int64_t kineto_job) {
  for (const char* name : {"GPUCTL_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"}) {
    auto it = env.find(name);
    if (it != env.end() && !it->second.empty()) return it->second.substr(0, kMaxJobIdBytes);
  }
  return kineto_job != 0 ? absl::StrCat(kineto_job) : "";
}

}  // namespace

KinetoBridge::KinetoBridge(const KinetoBridgeOptions& options, const Deps& deps)
    : options_(options), deps_(deps) {}

KinetoBridge::~KinetoBridge() {
  alive_.reset();
  if (sweep_timer_ != 0) deps_.loop->Cancel(sweep_timer_);
}

std::optional<std::string> KinetoBridge::OnDatagram(const PeerCredentials& creds,
                                                    const KinetoMessage& message,
                                                    KinetoSocket socket) {
  if (std::holds_alternative<KinetoContext>(message)) {
    // Old libkineto registers once; the heartbeats that follow register it.
    return EncodeContextReply(static_cast<int32_t>(processes_.size()));
  }
  return EncodeRequestReply(OnRequest(creds, std::get<KinetoRequest>(message)));
}

std::string KinetoBridge::OnRequest(const PeerCredentials& creds, const KinetoRequest& request) {
  std::optional<ProcIdentity> id = deps_.proc->Identity(creds.pid);
  if (!id.has_value()) return "";
  const int32_t claimed = request.pids.front();
  if (claimed != creds.pid && claimed != id->innermost_pid) {
    if (CountRefusal()) {
      LogWarning("kineto heartbeat claims another pid",
                 {{"pid", creds.pid}, {"claimed", claimed}, {"refused", refused_}});
    }
    return "";
  }
  auto it = by_key_.find(Key{creds.pid, id->start_time});
  if (it == by_key_.end()) {
    // A new process has no capture to be told of yet.
    BeginRegistration(creds, *id, request);
    return "";
  }
  Process* process = Find(it->second);
  return process == nullptr ? "" : Heartbeat(*process, request.activities_idle());
}

void KinetoBridge::BeginRegistration(const PeerCredentials& creds, const ProcIdentity& id,
                                     const KinetoRequest& request) {
  const Key key{creds.pid, id.start_time};
  if (auto it = refused_until_.find(key);
      it != refused_until_.end() && deps_.clock->Now() < it->second) {
    return;
  }
  // Bounded like the registry: a flood of new pids queues no more reads.
  if (registering_.contains(key) || registering_.size() >= options_.max_processes) return;
  registering_.insert(key);
  deps_.worker->Run([this, loop = deps_.loop, weak = std::weak_ptr<bool>(alive_),
                     reader = deps_.proc, creds, id, request] {
    ProcessFacts facts{.env = reader->Environment(creds.pid),
                       .cmdline = reader->CommandLine(creds.pid)};
    loop->Post([this, weak, creds, id, request, facts = std::move(facts)] {
      if (!weak.expired()) FinishRegistration(creds, id, request, facts);
    });
  });
}

void KinetoBridge::FinishRegistration(const PeerCredentials& creds, const ProcIdentity& id,
                                      const KinetoRequest& request, const ProcessFacts& facts) {
  registering_.erase(Key{creds.pid, id.start_time});
  // Gone or replaced while its facts were read: a later heartbeat of a
  // process with this pid registers that one.
  std::optional<ProcIdentity> now = deps_.proc->Identity(creds.pid);
  if (!now.has_value() || now->start_time != id.start_time ||
      by_key_.contains(Key{creds.pid, id.start_time})) {
    return;
  }
  if (Process* process = Register(creds, id, request, facts)) {
    Heartbeat(*process, request.activities_idle());
  }
}

v1::ipc::Hello KinetoBridge::SynthesizeHello(const ProcIdentity& id, const KinetoRequest& request,
                                             const ProcessFacts& facts) const {
  const absl::flat_hash_map<std::string, std::string>& env = facts.env;
  v1::ipc::Hello hello;
  hello.set_protocol_major(kIpcProtocolMajor);
  hello.set_protocol_minor(kIpcProtocolMinor);
  hello.set_library_version("kineto");
  hello.set_pid(id.innermost_pid);
  hello.set_job_id(JobId(env, request.job_id));
  hello.set_rank(RankVariable(env, "RANK"));
  hello.set_local_rank(RankVariable(env, "LOCAL_RANK"));
  hello.set_world_size(RankVariable(env, "WORLD_SIZE"));
  if (hello.rank() >= 0 && hello.world_size() > 0 && hello.rank() >= hello.world_size()) {
    hello.set_world_size(-1);
  }
  hello.set_hostname(options_.hostname.substr(0, kMaxHostnameBytes));
  size_t bytes = 0;
  for (const std::string& arg : facts.cmdline) {
    if (static_cast<size_t>(hello.cmdline_size()) == kMaxCmdlineArgs ||
        bytes + arg.size() > kMaxCmdlineBytes) {
      break;
    }
    bytes += arg.size();
    hello.add_cmdline(arg);
  }
  // kineto counts its own iterations (optimizer.step()).
  hello.set_capabilities(v1::ipc::CAPABILITY_STEP_WINDOWS);
  return hello;
}

KinetoBridge::Process* KinetoBridge::Register(const PeerCredentials& creds, const ProcIdentity& id,
                                              const KinetoRequest& request,
                                              const ProcessFacts& facts) {
  const absl::Time now = deps_.clock->Now();
  const Key key{creds.pid, id.start_time};
  if (auto it = refused_until_.find(key); it != refused_until_.end()) {
    if (now < it->second) return nullptr;
    refused_until_.erase(it);
  }
  // The pid's earlier process is gone: this one is new.
  if (auto it = by_pid_.find(creds.pid); it != by_pid_.end()) {
    Forget(it->second, /*clean=*/true, "the process exited (its pid now names another)");
  }
  if (HasLibrary(creds.pid)) {
    // CUPTI takes one subscriber: the library traces this process.
    if (refused_until_.size() >= kMaxRefusals) refused_until_.clear();
    refused_until_[key] = now + kRefusalHold;
    return nullptr;
  }
  if (processes_.size() >= options_.max_processes) {
    if (CountRefusal()) {
      LogWarning("kineto process not registered: kineto.max_processes reached",
                 {{"pid", creds.pid}, {"max_processes", options_.max_processes}});
    }
    return nullptr;
  }
  const PeerId peer = kKinetoPeerBit | next_peer_++;
  v1::ipc::Hello hello = SynthesizeHello(id, request, facts);
  PeerCredentials effective = creds;
  effective.uid = id.uid;
  if (absl::Status st = deps_.core->OnPeerHello(peer, effective, hello, nullptr); !st.ok()) {
    ++refused_;
    if (refused_until_.size() >= kMaxRefusals) refused_until_.clear();
    refused_until_[key] = now + kRefusalHold;
    return nullptr;
  }
  Process& process = processes_[peer];
  process.peer = peer;
  process.host_pid = creds.pid;
  process.start_time = id.start_time;
  process.uid = id.uid;
  process.own_pid = id.innermost_pid;
  process.rank = hello.rank();
  process.job_id = hello.job_id();
  process.period = options_.poll_period;
  by_key_[key] = peer;
  by_pid_[creds.pid] = peer;
  LogInfo("kineto process registered",
          {{"pid", creds.pid}, {"job_id", hello.job_id()}, {"rank", hello.rank()}, {"peer", peer}});
  ArmSweep();
  return &process;
}

std::string KinetoBridge::Heartbeat(Process& process, bool idle) {
  const absl::Time now = deps_.clock->Now();
  if (process.last_seen != absl::Time()) {
    const absl::Duration interval = now - process.last_seen;
    if (interval >= kMinPeriod) process.period = std::min(interval, kMaxPeriod);
  }
  process.last_seen = now;
  process.idle = idle;
  if (!process.capture.has_value()) return "";
  Capture& capture = *process.capture;
  if (!capture.delivered) {
    if (idle) return Deliver(process);
    ReportFailure(process, v1::CAPTURE_STATUS_BUSY,
                  "kineto's activity profiler is busy (the job's own torch.profiler, or another "
                  "daemon's trace)");
    return "";
  }
  if (!idle && !capture.started_reported) ReportStarted(process);
  if (now >= capture.end || (capture.config.iterations > 0 && idle)) SchedulePickup(process);
  return "";
}

void KinetoBridge::Forget(PeerId peer, bool clean, std::string reason) {
  auto it = processes_.find(peer);
  if (it == processes_.end()) return;
  by_key_.erase(Key{it->second.host_pid, it->second.start_time});
  if (auto p = by_pid_.find(it->second.host_pid); p != by_pid_.end() && p->second == peer) {
    by_pid_.erase(p);
  }
  processes_.erase(it);
  // Posted: Forget runs inside the core's own calls (Disconnect).
  PostToLoop([this, peer, clean, reason = std::move(reason)] {
    deps_.core->OnPeerGone(peer, clean, reason);
  });
}

void KinetoBridge::ArmSweep() {
  if (sweep_timer_ != 0 || (processes_.empty() && abandoned_.empty())) return;
  sweep_timer_ =
      deps_.loop->PostDelayed(options_.sweep_period, [this, weak = std::weak_ptr<bool>(alive_)] {
        if (weak.expired()) return;
        sweep_timer_ = 0;
        Sweep();
        ArmSweep();
      });
}

void KinetoBridge::Sweep() {
  const absl::Time now = deps_.clock->Now();
  std::vector<std::pair<PeerId, std::string>> silent;
  for (auto& [peer, process] : processes_) {
    const absl::Duration limit =
        std::clamp(3 * process.period, options_.min_expiry, options_.max_expiry);
    if (now - process.last_seen > limit) {
      silent.emplace_back(
          peer, absl::StrCat("no heartbeat for ", absl::FormatDuration(now - process.last_seen),
                             " (3 poll periods)"));
      continue;
    }
    if (process.capture.has_value() && process.capture->delivered &&
        (now >= process.capture->end || process.capture->config.iterations > 0)) {
      SchedulePickup(process);
    }
  }
  SweepAbandoned(now);
  for (auto& [peer, reason] : silent) {
    Process* process = Find(peer);
    std::optional<ProcIdentity> id = deps_.proc->Identity(process->host_pid);
    const bool gone = !id.has_value() || id->start_time != process->start_time;
    Forget(peer, gone, gone ? "the process exited" : std::move(reason));
  }
}

bool KinetoBridge::HasLibrary(int32_t host_pid) {
  v1::ListProcessesRequest request;
  request.mutable_selector()->add_pids(host_pid);
  request.mutable_selector()->set_include_helpers(true);
  absl::StatusOr<v1::ListProcessesResponse> listed = deps_.core->ListProcesses(request);
  if (!listed.ok()) return false;
  for (const v1::ProcessInfo& info : listed->processes()) {
    if (info.pid() == host_pid && info.kind() == v1::PROCESS_KIND_LIBRARY) return true;
  }
  return false;
}

bool KinetoBridge::CountRefusal() {
  ++refused_;
  return (refused_ & (refused_ - 1)) == 0;  // the 1st, 2nd, 4th, 8th ...
}

KinetoBridge::Process* KinetoBridge::Find(PeerId peer) {
  auto it = processes_.find(peer);
  return it == processes_.end() ? nullptr : &it->second;
}

void KinetoBridge::DescribePeer(PeerId peer, v1::ProcessInfo* info) {
  const Process* process = Find(peer);
  if (process == nullptr) return;
  info->set_kind(v1::PROCESS_KIND_KINETO);
  info->set_profiler_busy(!process->idle);
  *info->mutable_poll_period() = ToProtoDuration(process->period);
}

void KinetoBridge::DescribeStatus(v1::GetStatusResponse* status) {
  v1::KinetoBridgeStatus* kineto = status->mutable_kineto();
  if (deps_.server != nullptr) *kineto = deps_.server->Status();
  kineto->set_processes(static_cast<uint32_t>(processes_.size()));
}

}  // namespace gpuctl::daemon::kineto
