// Registry::Roles: who is a launcher, a worker or a helper, from the
// process tree and the identities of the processes attached now.
#include <algorithm>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "daemon/core/registry.h"

namespace gpuctl::daemon {
namespace {

// A helper is a fork of its rank's process: the same job and rank, and
// either the same command line (forked without exec, like a DataLoader
// worker) or a multiprocessing "spawn" child. A descendant with the same
// rank but its own command line (a wrapper script exec'ing python, torchrun
// under srun taking SLURM_PROCID as its rank) is a worker of its own, which
// makes the ancestor its launcher.
bool ForkedFrom(const AttachedProcess& child, const AttachedProcess& parent) {
  if (child.info.job_id() != parent.info.job_id() || child.info.rank() != parent.info.rank()) {
    return false;
  }
  const auto& c = child.info.cmdline();
  const auto& p = parent.info.cmdline();
  if (std::equal(c.begin(), c.end(), p.begin(), p.end())) return true;
  return std::find(c.begin(), c.end(), "--multiprocessing-fork") != c.end();
}

}  // namespace

absl::flat_hash_map<PeerId, v1::ProcessRole> Registry::Roles() const {
  // A pid attached twice (a reconnection not yet noticed) resolves to its
  // newest connection.
  absl::flat_hash_map<int32_t, const AttachedProcess*> by_pid;
  for (const auto& [peer, process] : processes_) by_pid[process.info.pid()] = &process;
  absl::flat_hash_set<PeerId> helpers;
  absl::flat_hash_set<PeerId> launchers;
  for (const auto& [peer, process] : processes_) {
    bool nearest = true;
    for (int32_t pid : process.ancestors) {
      auto it = by_pid.find(pid);
      if (it == by_pid.end() || it->second == &process) continue;
      const AttachedProcess& ancestor = *it->second;
      if (ForkedFrom(process, ancestor)) {
        if (nearest) helpers.insert(peer);
      } else {
        launchers.insert(ancestor.peer);
      }
      nearest = false;
    }
  }
  absl::flat_hash_map<PeerId, v1::ProcessRole> roles;
  for (const auto& [peer, process] : processes_) {
    roles[peer] = helpers.contains(peer)     ? v1::PROCESS_ROLE_HELPER
                  : launchers.contains(peer) ? v1::PROCESS_ROLE_LAUNCHER
                                             : v1::PROCESS_ROLE_WORKER;
  }
  return roles;
}

}  // namespace gpuctl::daemon
