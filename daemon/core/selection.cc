// Registry::Select: which attached processes a ProcessSelector picks
// (service.proto's rules).
#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/core/registry.h"
#include "daemon/core/selector.h"

namespace gpuctl::daemon {
namespace {

bool InRanks(const v1::ProcessSelector& selector, int32_t rank) {
  if (rank < 0) return false;
  return std::any_of(
      selector.ranks().begin(), selector.ranks().end(),
      [rank](const v1::RankRange& r) { return r.first() <= rank && rank <= r.last(); });
}

bool HasLabels(const v1::ProcessSelector& selector, const v1::ProcessInfo& info) {
  for (const auto& [key, value] : selector.labels()) {
    auto it = info.labels().find(key);
    if (it == info.labels().end() || it->second != value) return false;
  }
  return true;
}

// Every criterion but the role: job, pids (the process or an ancestor),
// ranks and labels.
bool MatchesCriteria(const v1::ProcessSelector& selector, const absl::flat_hash_set<int32_t>& pids,
                     const AttachedProcess& process) {
  const v1::ProcessInfo& info = process.info;
  if (!selector.job_id().empty() && info.job_id() != selector.job_id()) return false;
  if (!pids.empty() && !pids.contains(info.pid()) &&
      std::none_of(process.ancestors.begin(), process.ancestors.end(),
                   [&](int32_t pid) { return pids.contains(pid); })) {
    return false;
  }
  if (selector.ranks_size() > 0 && !InRanks(selector, info.rank())) return false;
  return HasLabels(selector, info);
}

// A launcher named by pid stands for its workers, which its pid selects; a
// helper named by pid is taken as asked.
bool RoleSelected(const v1::ProcessSelector& selector, v1::ProcessRole role, bool named) {
  return selector.include_helpers() || role == v1::PROCESS_ROLE_WORKER ||
         (named && role == v1::PROCESS_ROLE_HELPER);
}

// Keeps the first `limit` by rank (unknown last), then pid; attach order
// is kept among those.
void ApplyLimit(uint32_t limit, std::vector<SelectedProcess>* selected) {
  if (limit == 0 || selected->size() <= limit) return;
  std::vector<SelectedProcess> ranked = *selected;
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    const v1::ProcessInfo& x = a.process->info;
    const v1::ProcessInfo& y = b.process->info;
    return std::make_tuple(x.rank() < 0, x.rank(), x.pid()) <
           std::make_tuple(y.rank() < 0, y.rank(), y.pid());
  });
  absl::flat_hash_set<PeerId> kept;
  for (size_t i = 0; i < limit; ++i) kept.insert(ranked[i].process->peer);
  std::erase_if(*selected,
                [&](const SelectedProcess& s) { return !kept.contains(s.process->peer); });
}

// Jobs by how many selected processes they have, for a message: at most a
// few, largest first.
std::string DescribeJobs(const absl::flat_hash_map<std::string, size_t>& jobs) {
  constexpr size_t kShown = 5;
  std::vector<std::pair<std::string, size_t>> sorted(jobs.begin(), jobs.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return std::tie(b.second, a.first) < std::tie(a.second, b.first);
  });
  std::vector<std::string> parts;
  for (size_t i = 0; i < sorted.size() && i < kShown; ++i) {
    const auto& [job, count] = sorted[i];
    parts.push_back(absl::StrCat(job.empty() ? "no job" : absl::StrCat("job ", QuoteExcerpt(job)),
                                 " (", count, count == 1 ? " process)" : " processes)"));
  }
  if (sorted.size() > kShown) parts.push_back(absl::StrCat(sorted.size() - kShown, " more"));
  return absl::StrJoin(parts, ", ");
}

}  // namespace

absl::Status Registry::CheckAncestorReach(const v1::ProcessSelector& selector,
                                          const Selection& selection) const {
  if (selector.pids_size() == 0) return absl::OkStatus();
  absl::flat_hash_set<int32_t> attached;
  for (const auto& [peer, process] : processes_) attached.insert(process.info.pid());
  for (int32_t pid : selector.pids()) {
    if (attached.contains(pid)) continue;  // a launcher named: its workers, whatever their jobs
    absl::flat_hash_map<std::string, size_t> jobs;
    for (const SelectedProcess& selected : selection.processes) {
      const std::vector<int32_t>& ancestors = selected.process->ancestors;
      if (std::find(ancestors.begin(), ancestors.end(), pid) != ancestors.end()) {
        ++jobs[selected.process->info.job_id()];
      }
    }
    if (jobs.empty()) continue;
    if (pid == 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pid 1 is not an attached process, and every process descends from it (here ",
          DescribeJobs(jobs),
          "); select by job (job_id, gpuctl --job ID) or by the pid of a "
          "job's launcher"));
    }
    if (jobs.size() > 1 && !selector.allow_multiple_jobs()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pid ", pid, " is not an attached process; as an ancestor it reaches processes of ",
          jobs.size(), " jobs: ", DescribeJobs(jobs),
          "; name the job (job_id, gpuctl --job ID) or ask for every job explicitly "
          "(allow_multiple_jobs, gpuctl --all-jobs)"));
    }
  }
  return absl::OkStatus();
}

Selection Registry::Select(const v1::ProcessSelector& selector, bool all_when_empty) {
  Selection out;
  const bool everything = !HasCriterion(selector);
  if (everything && !all_when_empty) return out;
  absl::flat_hash_map<PeerId, v1::ProcessRole> roles = Roles();
  absl::flat_hash_set<int32_t> pids(selector.pids().begin(), selector.pids().end());
  for (auto& [peer, process] : processes_) {
    const v1::ProcessRole role = roles[peer];
    if (!everything) {
      if (!MatchesCriteria(selector, pids, process)) continue;
      if (!RoleSelected(selector, role, pids.contains(process.info.pid()))) {
        ++out.left_out_by_role;
        continue;
      }
    }
    out.processes.push_back({&process, role});
  }
  ApplyLimit(selector.limit(), &out.processes);
  return out;
}

}  // namespace gpuctl::daemon
