#include "daemon/core/registry.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <optional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "daemon/core/cmdline_redaction.h"
#include "daemon/core/proto_time.h"

namespace gpuctl::daemon {
namespace {

absl::Status CheckSize(absl::string_view field, absl::string_view value, size_t max) {
  if (value.size() > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("Hello ", field, " is ", value.size(), " bytes, more than ", max));
  }
  return absl::OkStatus();
}

absl::Status CheckRankField(absl::string_view field, int32_t value) {
  if (value < -1) {
    return absl::InvalidArgumentError(absl::StrCat("Hello ", field, " ", value, " is below -1"));
  }
  return absl::OkStatus();
}

// The peer's pid in its innermost pid namespace, from the NSpid line of
// /proc/<pid>/status ("NSpid:\t4711\t12\t1"); nullopt when unreadable.
std::optional<int64_t> InnermostPid(absl::string_view proc_root, pid_t pid) {
  std::ifstream status(absl::StrCat(proc_root, "/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (!absl::StartsWith(line, "NSpid:")) continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(absl::string_view(line).substr(6), absl::ByAnyChar(" \t"), absl::SkipEmpty());
    int64_t innermost = 0;
    if (fields.empty() || !absl::SimpleAtoi(fields.back(), &innermost)) return std::nullopt;
    return innermost;
  }
  return std::nullopt;
}

// "key=value" pairs of a Hello as a map, checked against ipc.proto's rules.
absl::StatusOr<absl::btree_map<std::string, std::string>> ParseHelloLabels(
    const v1::ipc::Hello& hello) {
  if (static_cast<size_t>(hello.labels_size()) > kMaxLabels) {
    return absl::InvalidArgumentError(
        absl::StrCat("Hello has ", hello.labels_size(), " labels, more than ", kMaxLabels));
  }
  absl::btree_map<std::string, std::string> labels;
  for (const std::string& label : hello.labels()) {
    size_t eq = label.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Hello label \"", absl::CHexEscape(label.substr(0, 64)), "\" is not key=value"));
    }
    absl::string_view key = absl::string_view(label).substr(0, eq);
    absl::string_view value = absl::string_view(label).substr(eq + 1);
    if (auto st = ValidateLabel("Hello label", key, value); !st.ok()) return st;
    if (!labels.emplace(key, value).second) {
      return absl::InvalidArgumentError(absl::StrCat("Hello label ", key, " appears twice"));
    }
  }
  return labels;
}

// The ppid field of <proc_root>/<pid>/stat ("4711 (python3) S 4700 ...";
// the command name may hold spaces and parentheses, so fields are counted
// from the last ')').
std::optional<int32_t> ParentPid(absl::string_view proc_root, int32_t pid) {
  std::ifstream file(absl::StrCat(proc_root, "/", pid, "/stat"));
  std::string stat;
  if (!std::getline(file, stat)) return std::nullopt;
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(close + 1), ' ', absl::SkipEmpty());
  int32_t ppid = 0;
  if (fields.size() < 2 || !absl::SimpleAtoi(fields[1], &ppid)) return std::nullopt;
  return ppid;
}

}  // namespace

absl::Status ValidateHello(const PeerCredentials& creds, const v1::ipc::Hello& hello,
                           absl::string_view proc_root) {
  if (hello.protocol_major() != kIpcProtocolMajor) {
    return absl::FailedPreconditionError(absl::StrCat(
        "client speaks IPC protocol ", hello.protocol_major(), ".", hello.protocol_minor(),
        ", daemon speaks ", kIpcProtocolMajor, ".", kIpcProtocolMinor));
  }
  if (hello.pid() != creds.pid && InnermostPid(proc_root, creds.pid) != hello.pid()) {
    return absl::PermissionDeniedError(absl::StrCat("Hello claims pid ", hello.pid(),
                                                    " but the socket belongs to pid ", creds.pid));
  }
  if (auto st = CheckSize("job_id", hello.job_id(), kMaxJobIdBytes); !st.ok()) return st;
  if (auto st = CheckSize("hostname", hello.hostname(), kMaxHostnameBytes); !st.ok()) return st;
  if (auto st = CheckSize("library_version", hello.library_version(), kMaxVersionBytes); !st.ok()) {
    return st;
  }
  if (static_cast<size_t>(hello.cmdline_size()) > kMaxCmdlineArgs) {
    return absl::InvalidArgumentError(absl::StrCat("Hello cmdline has ", hello.cmdline_size(),
                                                   " arguments, more than ", kMaxCmdlineArgs));
  }
  size_t cmdline_bytes = 0;
  for (const std::string& arg : hello.cmdline()) cmdline_bytes += arg.size();
  if (cmdline_bytes > kMaxCmdlineBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("Hello cmdline is ", cmdline_bytes, " bytes, more than ", kMaxCmdlineBytes));
  }
  if (auto st = CheckRankField("rank", hello.rank()); !st.ok()) return st;
  if (auto st = CheckRankField("local_rank", hello.local_rank()); !st.ok()) return st;
  if (auto st = CheckRankField("world_size", hello.world_size()); !st.ok()) return st;
  if (hello.rank() >= 0 && hello.world_size() > 0 && hello.rank() >= hello.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Hello rank ", hello.rank(), " is not below world_size ", hello.world_size()));
  }
  return ParseHelloLabels(hello).status();
}

std::vector<int32_t> ReadAncestors(absl::string_view proc_root, int32_t pid) {
  std::vector<int32_t> out;
  int32_t current = pid;
  while (out.size() < static_cast<size_t>(kMaxAncestors)) {
    std::optional<int32_t> ppid = ParentPid(proc_root, current);
    if (!ppid.has_value() || *ppid <= 0 || *ppid == current) break;
    out.push_back(*ppid);
    if (*ppid == 1) break;
    current = *ppid;
  }
  return out;
}


absl::Status Registry::Add(PeerId peer, const PeerCredentials& creds, const v1::ipc::Hello& hello,
                           absl::Time now, std::unique_ptr<StepCounterView> steps) {
  if (processes_.contains(peer)) {
    return absl::AlreadyExistsError(absl::StrCat("peer ", peer, " already sent Hello"));
  }
  absl::Status status = CheckAndAdd(peer, creds, hello, now, std::move(steps));
  if (!status.ok()) RememberRejection(creds, hello, now, status);
  return status;
}

void Registry::RememberRejection(const PeerCredentials& creds, const v1::ipc::Hello& hello,
                                 absl::Time now, const absl::Status& status) {
  v1::RejectedAttachment entry;
  entry.set_pid(creds.pid);
  entry.set_uid(creds.uid);
  entry.set_reason(std::string(status.message()));
  *entry.mutable_time() = ToProtoTimestamp(now);
  // Only what the checks let through is worth showing; sizes are bounded.
  if (hello.job_id().size() <= kMaxJobIdBytes) entry.set_job_id(hello.job_id());
  entry.set_rank(hello.rank() >= -1 ? hello.rank() : -1);
  auto same = std::find_if(rejected_.begin(), rejected_.end(), [&](const auto& r) {
    return r.pid() == entry.pid() && r.uid() == entry.uid() && r.reason() == entry.reason();
  });
  if (same != rejected_.end()) {
    entry.set_repeats(same->repeats() + 1);
    rejected_.erase(same);
  }
  rejected_.push_back(std::move(entry));
  const uint32_t uid = creds.uid;
  if (std::count_if(rejected_.begin(), rejected_.end(),
                    [uid](const auto& r) { return r.uid() == uid; }) >
      static_cast<std::ptrdiff_t>(kMaxRejectedPerUid)) {
    rejected_.erase(std::find_if(rejected_.begin(), rejected_.end(),
                                 [uid](const auto& r) { return r.uid() == uid; }));
  }
  while (rejected_.size() > kMaxRejectedAttachments) rejected_.pop_front();
}

absl::Status Registry::CheckAndAdd(PeerId peer, const PeerCredentials& creds,
                                   const v1::ipc::Hello& hello, absl::Time now,
                                   std::unique_ptr<StepCounterView> steps) {
  if (!allowed_uids_.empty() &&
      std::find(allowed_uids_.begin(), allowed_uids_.end(), creds.uid) == allowed_uids_.end()) {
    return absl::PermissionDeniedError(
        absl::StrCat("uid ", creds.uid, " may not attach (not in ipc.allowed_uids)"));
  }
  if (auto st = ValidateHello(creds, hello, proc_root_); !st.ok()) return st;
  absl::StatusOr<absl::btree_map<std::string, std::string>> labels = ParseHelloLabels(hello);
  if (!labels.ok()) return labels.status();
  AttachedProcess process{peer, {}, ReadAncestors(proc_root_, creds.pid), std::move(steps),
                          hello.capabilities()};
  // The Hello's ppid is in the peer's pid namespace: usable only when that
  // is the daemon's.
  if (process.ancestors.empty() && hello.pid() == creds.pid && hello.ppid() > 0) {
    process.ancestors.push_back(hello.ppid());
  }
  v1::ProcessInfo& info = process.info;
  info.set_pid(creds.pid);
  info.set_ppid(process.ancestors.empty() ? hello.ppid() : process.ancestors.front());
  info.set_uid(creds.uid);
  info.set_job_id(hello.job_id());
  info.set_rank(hello.rank());
  info.set_local_rank(hello.local_rank());
  info.set_world_size(hello.world_size());
  info.set_hostname(hello.hostname());
  for (std::string& arg : RedactCommandLine({hello.cmdline().begin(), hello.cmdline().end()})) {
    info.add_cmdline(std::move(arg));
  }
  info.set_library_version(hello.library_version());
  *info.mutable_attached_at() = ToProtoTimestamp(now);
  info.set_capture_state(v1::CAPTURE_STATE_IDLE);
  info.mutable_labels()->insert(labels->begin(), labels->end());
  processes_.emplace(peer, std::move(process));
  return absl::OkStatus();
}

void Registry::Remove(PeerId peer) { processes_.erase(peer); }

AttachedProcess* Registry::Find(PeerId peer) {
  auto it = processes_.find(peer);
  return it == processes_.end() ? nullptr : &it->second;
}

absl::flat_hash_map<PeerId, v1::ProcessRole> Registry::Roles() const {
  // A pid attached twice (a reconnection not yet noticed) resolves to its
  // newest connection.
  absl::flat_hash_map<int32_t, const AttachedProcess*> by_pid;
  for (const auto& [peer, process] : processes_) by_pid[process.info.pid()] = &process;
  // A helper is a fork of its rank's process: the same job and rank, and
  // either the same command line (forked without exec, like a DataLoader
  // worker) or a multiprocessing "spawn" child. A descendant with the same
  // rank but its own command line (a wrapper script exec'ing python, torchrun
  // under srun taking SLURM_PROCID as its rank) is a worker of its own, which
  // makes the ancestor its launcher.
  auto forked_from = [](const AttachedProcess& child, const AttachedProcess& parent) {
    if (child.info.job_id() != parent.info.job_id() || child.info.rank() != parent.info.rank()) {
      return false;
    }
    const auto& c = child.info.cmdline();
    const auto& p = parent.info.cmdline();
    if (std::equal(c.begin(), c.end(), p.begin(), p.end())) return true;
    return std::find(c.begin(), c.end(), "--multiprocessing-fork") != c.end();
  };
  absl::flat_hash_set<PeerId> helpers;
  absl::flat_hash_set<PeerId> launchers;
  for (const auto& [peer, process] : processes_) {
    bool nearest = true;
    for (int32_t pid : process.ancestors) {
      auto it = by_pid.find(pid);
      if (it == by_pid.end() || it->second == &process) continue;
      const AttachedProcess& ancestor = *it->second;
      if (forked_from(process, ancestor)) {
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

}  // namespace

Selection Registry::Select(const v1::ProcessSelector& selector, bool all_when_empty) {
  Selection out;
  const bool everything = !HasCriterion(selector);
  if (everything && !all_when_empty) return out;
  absl::flat_hash_map<PeerId, v1::ProcessRole> roles = Roles();
  absl::flat_hash_set<int32_t> pids(selector.pids().begin(), selector.pids().end());
  for (auto& [peer, process] : processes_) {
    const v1::ProcessInfo& info = process.info;
    const v1::ProcessRole role = roles[peer];
    const bool named = pids.contains(info.pid());
    if (!everything) {
      if (!selector.job_id().empty() && info.job_id() != selector.job_id()) continue;
      if (!pids.empty() && !named &&
          std::none_of(process.ancestors.begin(), process.ancestors.end(),
                       [&](int32_t pid) { return pids.contains(pid); })) {
        continue;
      }
      if (selector.ranks_size() > 0 && !InRanks(selector, info.rank())) continue;
      if (!HasLabels(selector, info)) continue;
      // A launcher named by pid stands for its workers, which its pid
      // selects; a helper named by pid is taken as asked.
      const bool role_ok = selector.include_helpers() || role == v1::PROCESS_ROLE_WORKER ||
                           (named && role == v1::PROCESS_ROLE_HELPER);
      if (!role_ok) {
        ++out.left_out_by_role;
        continue;
      }
    }
    out.processes.push_back({&process, role});
  }
  ApplyLimit(selector.limit(), &out.processes);
  return out;
}

v1::ProcessInfo Registry::Info(const AttachedProcess& process, v1::ProcessRole role) {
  v1::ProcessInfo info = process.info;
  info.set_role(role);
  if (process.steps == nullptr) return info;
  StepReading reading = process.steps->Read();
  if (!reading.has_step) return info;
  info.set_current_step(reading.current_step);
  if (reading.last_step_time.has_value()) {
    *info.mutable_last_step_time() = ToProtoTimestamp(*reading.last_step_time);
  }
  if (reading.period.has_value()) *info.mutable_step_period() = ToProtoDuration(*reading.period);
  return info;
}

std::vector<const AttachedProcess*> Registry::All() const {
  std::vector<const AttachedProcess*> out;
  out.reserve(processes_.size());
  for (const auto& [peer, process] : processes_) out.push_back(&process);
  return out;
}

std::string Registry::DescribeAttached() const {
  absl::flat_hash_map<std::string, size_t> counts;
  for (const auto& [peer, process] : processes_) ++counts[process.info.job_id()];
  std::vector<std::pair<std::string, size_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::string out = absl::StrCat(processes_.size(), " attached");
  for (size_t i = 0; i < sorted.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? ": " : ", ", "job \"", sorted[i].first, "\" x",
                    sorted[i].second);
  }
  return out;
}

}  // namespace gpuctl::daemon
