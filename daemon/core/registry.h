#ifndef GPUCTL_DAEMON_CORE_REGISTRY_H_
#define GPUCTL_DAEMON_CORE_REGISTRY_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/core/hello_validation.h"
#include "daemon/core/peer_channel.h"
#include "daemon/core/proc_reader.h"
#include "daemon/core/selector.h"
#include "daemon/core/steps.h"
#include "gpuctl/v1/ipc.pb.h"
#include "gpuctl/v1/limits.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon {

// How many refused attachments the registry remembers (the newest).
inline constexpr size_t kMaxRejectedAttachments = 100;
// No uid holds more of that list than this, so one uid connecting in a
// loop cannot push every other uid's refusals out.
inline constexpr size_t kMaxRejectedPerUid = kMaxRejectedAttachments / 2;

struct AttachedProcess {
  PeerId peer;
  // pid, ppid and uid are the daemon's view, the rest comes from the
  // Hello. role and the step fields are filled per query (Registry::Info).
  v1::ProcessInfo info;
  // Parent chain in the daemon's pid namespace, nearest first, read at
  // Hello.
  std::vector<int32_t> ancestors;
  // The process's shared step counter; null when it shares none.
  std::unique_ptr<StepCounterView> steps;
  // Hello.capabilities (v1::ipc::Capability bits).
  uint64_t capabilities = 0;
  // The pid the process knows itself by (Hello.pid, checked against the
  // socket's: innermost in its pid namespace, so 1 for a container's first
  // process). Its trace data carries this one.
  int32_t own_pid = 0;
};

// One process picked by a selector, with its role at selection time.
struct SelectedProcess {
  AttachedProcess* process;
  v1::ProcessRole role;
};

struct Selection {
  // In attach order.
  std::vector<SelectedProcess> processes;
  // Matched every criterion but left out for its role (launchers and
  // helpers without include_helpers), before any limit.
  size_t left_out_by_role = 0;
};

// Attached processes keyed by connection. Not thread-safe: owned by the
// event loop.
class Registry {
 public:
  // `proc` is the daemon's view of the processes (tests pass a fake).
  // `allowed_uids`: the only uids whose processes may attach; empty: any.
  explicit Registry(std::unique_ptr<const ProcReader> proc = std::make_unique<ProcfsReader>(),
                    std::vector<uint32_t> allowed_uids = {})
      : proc_(std::move(proc)), allowed_uids_(std::move(allowed_uids)) {}
  // Reads the procfs at `proc_root`.
  explicit Registry(std::string proc_root, std::vector<uint32_t> allowed_uids = {})
      : Registry(std::make_unique<ProcfsReader>(std::move(proc_root)), std::move(allowed_uids)) {}

  // Checks the peer's uid against the allow-list (PERMISSION_DENIED naming
  // it), validates (ValidateHello) and adds, reading the process's
  // ancestors (falling back to the Hello's ppid when /proc cannot be read
  // and the Hello's pid is the daemon's). The command line is stored with
  // credentials redacted (RedactCommandLine). `steps` may be null.
  // ALREADY_EXISTS if the peer already said Hello. Every refusal but that
  // one is remembered (Rejected()).
  absl::Status Add(PeerId peer, const PeerCredentials& creds, const v1::ipc::Hello& hello,
                   absl::Time now, std::unique_ptr<StepCounterView> steps = nullptr);
  void Remove(PeerId peer);
  AttachedProcess* Find(PeerId peer);

  // Every process's role, from the process tree and identities of the
  // processes attached now: HELPER when its nearest attached ancestor has
  // the same job and rank; else LAUNCHER when an attached descendant has
  // another job or rank; else WORKER.
  absl::flat_hash_map<PeerId, v1::ProcessRole> Roles() const;

  // Processes matching `selector` (service.proto's rules: criteria AND-ed,
  // workers only unless include_helpers or named by pid, at most `limit`
  // by rank then pid). A selector without criterion matches nothing, or,
  // with `all_when_empty`, every process of any role (still limited).
  // The selector is assumed valid (ValidateSelector).
  Selection Select(const v1::ProcessSelector& selector, bool all_when_empty = false);

  // Refuses (FAILED_PRECONDITION, naming the pid, the jobs and how to ask
  // for them) a `selection` of `selector` that a pid which is not an
  // attached process reaches as an ancestor when the processes it reaches
  // belong to more than one job and the selector does not allow that
  // (allow_multiple_jobs), or when that pid is 1.
  absl::Status CheckAncestorReach(const v1::ProcessSelector& selector,
                                  const Selection& selection) const;

  // The process's info with `role` and its live step counter fields, with
  // the recent step durations when `with_durations`.
  static v1::ProcessInfo Info(const AttachedProcess& process, v1::ProcessRole role,
                              bool with_durations = false);

  std::vector<const AttachedProcess*> All() const;
  size_t size() const { return processes_.size(); }

  // The last kMaxRejectedAttachments refusals, oldest first.
  const std::deque<v1::RejectedAttachment>& Rejected() const { return rejected_; }

  // `3 attached: job "7" x2, job "" x1` (most common job first).
  std::string DescribeAttached() const;

  // Adds a refusal to Rejected(); Add does it for its own refusals. A
  // repeat of an entry (same pid, uid and reason) moves it to the newest
  // place and counts in its `repeats`. Beyond kMaxRejectedPerUid entries of
  // one uid, that uid's oldest goes; beyond kMaxRejectedAttachments, the
  // oldest of all.
  void RememberRejection(const PeerCredentials& creds, const v1::ipc::Hello& hello, absl::Time now,
                         const absl::Status& status);

 private:
  absl::Status CheckAndAdd(PeerId peer, const PeerCredentials& creds, const v1::ipc::Hello& hello,
                           absl::Time now, std::unique_ptr<StepCounterView> steps);

  std::unique_ptr<const ProcReader> proc_;
  std::vector<uint32_t> allowed_uids_;
  absl::btree_map<PeerId, AttachedProcess> processes_;
  std::deque<v1::RejectedAttachment> rejected_;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_REGISTRY_H_
