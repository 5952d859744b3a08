#include "daemon/core/registry.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <string>
#include <vector>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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
  return absl::OkStatus();
}

absl::Status Registry::Add(PeerId peer, const PeerCredentials& creds, const v1::ipc::Hello& hello,
                           absl::Time now) {
  if (processes_.contains(peer)) {
    return absl::AlreadyExistsError(absl::StrCat("peer ", peer, " already sent Hello"));
  }
  if (auto st = ValidateHello(creds, hello, proc_root_); !st.ok()) return st;
  AttachedProcess process{peer, {}};
  v1::ProcessInfo& info = process.info;
  info.set_pid(creds.pid);
  info.set_ppid(hello.ppid());
  info.set_uid(creds.uid);
  info.set_job_id(hello.job_id());
  info.set_rank(hello.rank());
  info.set_local_rank(hello.local_rank());
  info.set_world_size(hello.world_size());
  info.set_hostname(hello.hostname());
  *info.mutable_cmdline() = hello.cmdline();
  info.set_library_version(hello.library_version());
  *info.mutable_attached_at() = ToProtoTimestamp(now);
  info.set_capture_state(v1::CAPTURE_STATE_IDLE);
  processes_.emplace(peer, std::move(process));
  return absl::OkStatus();
}

void Registry::Remove(PeerId peer) { processes_.erase(peer); }

AttachedProcess* Registry::Find(PeerId peer) {
  auto it = processes_.find(peer);
  return it == processes_.end() ? nullptr : &it->second;
}

std::vector<AttachedProcess*> Registry::Select(const v1::ProcessSelector& selector) {
  std::vector<AttachedProcess*> out;
  for (auto& [peer, process] : processes_) {
    if (!selector.job_id().empty() && process.info.job_id() != selector.job_id()) continue;
    if (selector.pids_size() > 0 && std::find(selector.pids().begin(), selector.pids().end(),
                                              process.info.pid()) == selector.pids().end()) {
      continue;
    }
    out.push_back(&process);
  }
  return out;
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

std::string DescribeSelector(const v1::ProcessSelector& selector) {
  std::string out;
  if (!selector.job_id().empty()) absl::StrAppend(&out, "job \"", selector.job_id(), "\"");
  if (selector.pids_size() > 0) {
    absl::StrAppend(&out, out.empty() ? "" : " and ", "pids [",
                    absl::StrJoin(selector.pids(), ", "), "]");
  }
  return out;
}

}  // namespace gpuctl::daemon
