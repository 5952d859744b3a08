#ifndef GPUCTL_DAEMON_KINETO_KINETO_BRIDGE_H_
#define GPUCTL_DAEMON_KINETO_KINETO_BRIDGE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "daemon/common/clock.h"
#include "daemon/common/task_runner.h"
#include "daemon/core/daemon_core.h"
#include "daemon/core/peer_channel.h"
#include "daemon/kineto/kineto_pickup.h"
#include "daemon/kineto/kineto_procfs.h"
#include "daemon/kineto/kineto_protocol.h"
#include "daemon/kineto/kineto_server.h"

namespace gpuctl::daemon::kineto {

inline constexpr size_t kDefaultMaxProcesses = 4096;
inline constexpr uint64_t kDefaultMaxTraceBytes = uint64_t{256} << 20;
inline constexpr uint64_t kDefaultMaxTotalBytes = uint64_t{1} << 30;
inline constexpr absl::Duration kDefaultPollPeriod = absl::Seconds(5);
inline constexpr int32_t kDefaultWarmupSecs = 1;

struct KinetoBridgeOptions {
  std::string hostname;
  // kineto.max_processes: kineto processes registered at once; the
  // heartbeats of more are answered with nothing and not registered.
  size_t max_processes = kDefaultMaxProcesses;
  // kineto.max_trace_bytes: one process's trace file at most;
  // kineto.max_total_bytes: every kineto file of one trace together.
  uint64_t max_trace_bytes = kDefaultMaxTraceBytes;
  uint64_t max_total_bytes = kDefaultMaxTotalBytes;
  // kineto.poll_period: a process's poll period until two heartbeats show
  // its own (ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS, 5 s by default).
  absl::Duration poll_period = kDefaultPollPeriod;
  // A process is dropped after 3 poll periods without a heartbeat, within
  // these bounds.
  absl::Duration min_expiry = absl::Seconds(3);
  absl::Duration max_expiry = absl::Minutes(2);
  // kineto.warmup: ACTIVITIES_WARMUP_PERIOD_SECS sent with every trace.
  int32_t warmup_secs = kDefaultWarmupSecs;
  // How often expiry and trace files are checked.
  absl::Duration sweep_period = absl::Seconds(1);
  std::string proc_root = "/proc";
  int gzip_level = 6;
};

// The kineto side of the registry: each polling libkineto process becomes
// an attached process of the core (a Hello synthesized from /proc: job id
// and ranks from GPUCTL_JOB_ID, SLURM_JOB_ID, TORCHELASTIC_RUN_ID, RANK,
// LOCAL_RANK, WORLD_SIZE in its environment where readable, else kineto's
// job id; its command line), keyed by host pid and start time so a reused
// pid is a new process, and dropped after missed heartbeats (exited when
// gone, lost when silent). It is the PeerChannel of its processes: a
// StartCapture becomes the config reply to the process's next idle poll,
// the window's start is reported when its heartbeat turns busy, and the
// result when `<log file>_<pid>.json` appears in the process's /tmp
// (picked up on the worker, PickUpKinetoTrace), or busy when its profiler
// is taken. Every heartbeat is answered at once from memory: the loop
// never waits on disk or the core's storage.
//
// Threading: everything on the loop's thread; pickups on `worker`.
class KinetoBridge final : public PeerChannel, public KinetoDatagramHandler {
 public:
  struct Deps {
    Clock* clock;
    TaskRunner* loop;
    Executor* worker;
    DaemonCore* core;
    const KinetoProcReader* proc;
    // The sockets' state for GetStatus; may be null.
    const KinetoServer* server = nullptr;
  };
  KinetoBridge(const KinetoBridgeOptions& options, const Deps& deps);
  ~KinetoBridge() override;

  std::optional<std::string> OnDatagram(const PeerCredentials& creds, const KinetoMessage& message,
                                        KinetoSocket socket) override;

  absl::Status Send(PeerId peer, const v1::ipc::DaemonMessage& message) override;
  void Disconnect(PeerId peer, absl::string_view reason) override;
  absl::Time EarliestStart(PeerId peer, absl::Time now) override;
  void DescribePeer(PeerId peer, v1::ProcessInfo* info) override;
  void DescribeStatus(v1::GetStatusResponse* status) override;
  std::string ExplainMissingResult(PeerId peer, absl::string_view trace_id) override;

  size_t size() const { return processes_.size(); }
  // Heartbeats refused: a pid claim that is not the sender's, a full
  // registry, a process the core refused.
  uint64_t refused() const { return refused_; }

 private:
  struct Capture {
    std::string trace_id;
    KinetoCaptureConfig config;
    absl::Time end;  // the window's end, or an iteration window's bound
    bool delivered = false;
    absl::Time delivered_at;  // the poll that took the config
    bool started_reported = false;
    bool late = false;
    bool pickup_in_flight = false;
  };
  struct Process {
    PeerId peer = 0;
    int32_t host_pid = 0;
    uint64_t start_time = 0;
    uid_t uid = 0;
    int32_t own_pid = 0;
    int32_t rank = -1;
    std::string job_id;
    absl::Time last_seen;
    absl::Duration period;
    bool idle = true;
    std::optional<Capture> capture;
  };
  using Key = std::pair<int32_t, uint64_t>;  // host pid, start time
  // A cancelled capture that kineto had already taken: it cannot be
  // stopped, so its file is removed from the process's /tmp when it
  // appears, until `give_up`.
  struct Abandoned {
    PeerId peer = 0;
    PickupRequest pickup;
    absl::Time give_up;
    bool in_flight = false;
  };

  // What a registration reads of a process's memory (/proc/<pid>/environ
  // and cmdline wait on the process's memory lock, which it may hold for a
  // long time): read on the worker, never on the loop.
  struct ProcessFacts {
    absl::flat_hash_map<std::string, std::string> env;
    std::vector<std::string> cmdline;
  };

  std::string OnRequest(const PeerCredentials& creds, const KinetoRequest& request);
  // A new process's first heartbeat: its facts are read on the worker, and
  // it is registered back on the loop (one read at a time per process).
  void BeginRegistration(const PeerCredentials& creds, const ProcIdentity& id,
                         const KinetoRequest& request);
  void FinishRegistration(const PeerCredentials& creds, const ProcIdentity& id,
                          const KinetoRequest& request, const ProcessFacts& facts);
  Process* Register(const PeerCredentials& creds, const ProcIdentity& id,
                    const KinetoRequest& request, const ProcessFacts& facts);
  v1::ipc::Hello SynthesizeHello(const ProcIdentity& id, const KinetoRequest& request,
                                 const ProcessFacts& facts) const;
  // The config text to answer this heartbeat with ("" for none).
  std::string Heartbeat(Process& process, bool idle);
  std::string Deliver(Process& process);
  void Forget(PeerId peer, bool clean, std::string reason);
  void ArmSweep();
  void Sweep();
  void SchedulePickup(Process& process);
  PickupRequest PickupFor(const Process& process) const;
  void Abandon(Process& process);
  void SweepAbandoned(absl::Time now);
  void OnAbandonedPickedUp(int32_t pid, const std::string& path, PickupResult::Outcome outcome);
  void OnPickedUp(PeerId peer, const std::string& trace_id, PickupResult result);
  void ReportStarted(Process& process);
  // Ends the process's capture with `status` and `message` (not OK).
  void ReportFailure(Process& process, v1::CaptureStatus status, std::string message);
  void ReportDone(Process& process, PickupResult result);
  Process* Find(PeerId peer);
  // Whether the process is attached through libgpuctl.so already.
  bool HasLibrary(int32_t host_pid);
  // Counts a refused heartbeat; true when it is worth a log line (powers
  // of two, so a flood logs a few lines).
  bool CountRefusal();
  template <typename Fn>
  void PostToLoop(Fn fn) {
    deps_.loop->Post([weak = std::weak_ptr<bool>(alive_), fn = std::move(fn)]() mutable {
      if (!weak.expired()) fn();
    });
  }

  const KinetoBridgeOptions options_;
  const Deps deps_;
  absl::btree_map<PeerId, Process> processes_;
  absl::flat_hash_map<Key, PeerId> by_key_;
  absl::flat_hash_map<int32_t, PeerId> by_pid_;
  // Processes whose facts are being read for their registration.
  absl::flat_hash_set<Key> registering_;
  // Processes the core refused, not offered again before the time given.
  absl::flat_hash_map<Key, absl::Time> refused_until_;
  // Bytes of kineto files stored per trace id (kineto.max_total_bytes).
  absl::flat_hash_map<std::string, uint64_t> trace_bytes_;
  std::vector<Abandoned> abandoned_;
  PeerId next_peer_ = 1;
  uint64_t refused_ = 0;
  TaskRunner::TimerId sweep_timer_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace gpuctl::daemon::kineto

#endif  // GPUCTL_DAEMON_KINETO_KINETO_BRIDGE_H_
