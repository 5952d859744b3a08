#include "daemon/core/registry.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/cmdline_redaction.h"
#include "daemon/core/proto_time.h"

namespace gpuctl::daemon {
namespace {

// The registry's record of a process: the daemon's view of pid, ppid and
// uid, the rest from the Hello.
void FillInfo(const PeerCredentials& creds, const v1::ipc::Hello& hello, absl::Time now,
              const absl::btree_map<std::string, std::string>& labels, AttachedProcess* process) {
  v1::ProcessInfo& info = process->info;
  info.set_pid(creds.pid);
  process->own_pid = hello.pid();
  info.set_ppid(process->ancestors.empty() ? hello.ppid() : process->ancestors.front());
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
  info.mutable_labels()->insert(labels.begin(), labels.end());
}

}  // namespace

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
  if (std::count_if(rejected_.begin(), rejected_.end(), [uid](const auto& r) {
        return r.uid() == uid;
      }) > static_cast<std::ptrdiff_t>(kMaxRejectedPerUid)) {
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
  if (auto st = ValidateHello(creds, hello, *proc_); !st.ok()) return st;
  absl::StatusOr<absl::btree_map<std::string, std::string>> labels = ParseHelloLabels(hello);
  if (!labels.ok()) return labels.status();
  AttachedProcess process{
      peer, {}, ReadAncestors(*proc_, creds.pid), std::move(steps), hello.capabilities()};
  // The Hello's ppid is in the peer's pid namespace: usable only when that
  // is the daemon's.
  if (process.ancestors.empty() && hello.pid() == creds.pid && hello.ppid() > 0) {
    process.ancestors.push_back(hello.ppid());
  }
  FillInfo(creds, hello, now, *labels, &process);
  // The peer id says which adapter the process came through.
  process.info.set_kind(IsKinetoPeer(peer) ? v1::PROCESS_KIND_KINETO : v1::PROCESS_KIND_LIBRARY);
  processes_.emplace(peer, std::move(process));
  return absl::OkStatus();
}

void Registry::Remove(PeerId peer) { processes_.erase(peer); }

AttachedProcess* Registry::Find(PeerId peer) {
  auto it = processes_.find(peer);
  return it == processes_.end() ? nullptr : &it->second;
}

v1::ProcessInfo Registry::Info(const AttachedProcess& process, v1::ProcessRole role,
                               bool with_durations) {
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
  if (!with_durations) return info;
  info.set_step_durations_total(reading.durations_total);
  for (absl::Duration d : reading.recent_durations) {
    info.add_recent_step_ns(absl::ToInt64Nanoseconds(d));
  }
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
