#include "daemon/store/store_index.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/store/trace_store.h"

namespace gpuctl::daemon {

void StoreIndex::Add(StoredTrace trace) {
  MutexLock lock(&mu_);
  auto [it, inserted] = traces_.try_emplace(trace.trace_id);
  Entry& entry = it->second;
  const bool was_deleting = !inserted && entry.deleting;
  if (!inserted && !entry.deleting) Account(it->first, entry, -1);
  entry = Entry();
  entry.created = trace.created;
  entry.job_id = std::move(trace.job_id);
  entry.complete = trace.complete;
  entry.awaiting_upload = trace.awaiting_upload;
  entry.files = std::move(trace.files);
  std::sort(entry.files.begin(), entry.files.end());
  for (const auto& [name, bytes] : entry.files) entry.bytes += bytes;
  Account(it->first, entry, +1);
  if (was_deleting) delete_done_cv_.SignalAll();
}

void StoreIndex::AddTrace(absl::string_view trace_id, absl::Time created) {
  MutexLock lock(&mu_);
  FindOrAdd(trace_id, created);
}

void StoreIndex::RecordFile(absl::string_view trace_id, absl::Time created, absl::string_view name,
                            uint64_t bytes) {
  MutexLock lock(&mu_);
  Entry& entry = FindOrAdd(trace_id, created);
  SetFile(entry, name, bytes);
}

void StoreIndex::RecordManifest(absl::string_view trace_id, absl::Time created,
                                absl::string_view job_id, uint64_t bytes) {
  MutexLock lock(&mu_);
  Entry& entry = FindOrAdd(trace_id, created);
  const std::string& id = traces_.find(trace_id)->first;
  if (!entry.deleting) Account(id, entry, -1);
  entry.job_id = std::string(job_id);
  entry.complete = true;
  if (!entry.deleting) Account(id, entry, +1);
  SetFile(entry, kManifestFileName, bytes);
}

bool StoreIndex::ForgetFile(absl::string_view trace_id, absl::string_view name) {
  MutexLock lock(&mu_);
  auto trace = traces_.find(trace_id);
  if (trace == traces_.end()) return false;
  Entry& entry = trace->second;
  auto it = std::lower_bound(entry.files.begin(), entry.files.end(), name,
                             [](const auto& file, absl::string_view n) { return file.first < n; });
  if (it == entry.files.end() || it->first != name) return false;
  const uint64_t bytes = it->second;
  entry.files.erase(it);
  entry.bytes -= std::min(entry.bytes, bytes);
  if (!entry.deleting) totals_.bytes -= std::min(totals_.bytes, bytes);
  return true;
}

bool StoreIndex::SetAwaitingUpload(absl::string_view trace_id, bool awaiting) {
  MutexLock lock(&mu_);
  auto it = traces_.find(trace_id);
  if (it == traces_.end() || it->second.deleting) return false;
  Account(it->first, it->second, -1);
  it->second.awaiting_upload = awaiting;
  Account(it->first, it->second, +1);
  return true;
}

bool StoreIndex::Pin(absl::string_view trace_id) {
  MutexLock lock(&mu_);
  if (IsDeleting(trace_id)) return false;
  ++pins_[std::string(trace_id)];
  return true;
}

void StoreIndex::PinForWrite(absl::string_view trace_id) {
  MutexLock lock(&mu_);
  while (IsDeleting(trace_id)) delete_done_cv_.Wait(&mu_);
  ++pins_[std::string(trace_id)];
}

void StoreIndex::Unpin(absl::string_view trace_id) {
  MutexLock lock(&mu_);
  auto it = pins_.find(trace_id);
  if (it == pins_.end()) return;
  if (--it->second == 0) pins_.erase(it);
}

std::vector<std::string> StoreIndex::Page(absl::string_view after, absl::string_view job_id,
                                          size_t limit) const {
  std::vector<std::string> ids;
  MutexLock lock(&mu_);
  if (job_id.empty()) {
    auto it = after.empty() ? traces_.end() : traces_.lower_bound(after);
    while (ids.size() < limit && it != traces_.begin()) {
      --it;
      if (it->second.complete && !it->second.deleting) ids.push_back(it->first);
    }
    return ids;
  }
  // The first key past every (job_id, *) is (job_id + '\0', "").
  std::string job(job_id);
  auto it = after.empty() ? by_job_.lower_bound({absl::StrCat(job, std::string(1, '\0')), ""})
                          : by_job_.lower_bound({job, std::string(after)});
  while (ids.size() < limit && it != by_job_.begin()) {
    --it;
    if (it->first != job) break;
    ids.push_back(it->second);
  }
  return ids;
}

std::vector<Eviction> StoreIndex::TakeEvictions(const RetentionPolicy& policy, absl::Time now) {
  std::vector<Eviction> evictions;
  if (IsUnlimited(policy)) return evictions;
  MutexLock lock(&mu_);
  // max_count counts complete traces; max_bytes everything on disk.
  RetentionPlanner planner(policy, now, totals_.complete, totals_.bytes);
  for (auto& [id, entry] : traces_) {
    if (entry.deleting) continue;
    std::optional<EvictionReason> reason = planner.Over(entry.created);
    if (!reason.has_value()) break;
    if (!entry.complete || entry.awaiting_upload || IsPinned(id)) continue;
    planner.Evicted(entry.bytes);
    evictions.push_back(Eviction{id, *reason, entry.created, entry.bytes});
    Account(id, entry, -1);
    entry.deleting = true;
  }
  return evictions;
}

absl::Status StoreIndex::TakeForDelete(absl::string_view trace_id) {
  MutexLock lock(&mu_);
  auto it = traces_.find(trace_id);
  if (it == traces_.end() || it->second.deleting) {
    return absl::NotFoundError(absl::StrCat("no trace ", trace_id));
  }
  if (IsPinned(trace_id)) {
    return absl::FailedPreconditionError(
        absl::StrCat("trace ", trace_id, " is being read or written"));
  }
  if (it->second.awaiting_upload) {
    return absl::FailedPreconditionError(absl::StrCat("trace ", trace_id, " is not uploaded yet"));
  }
  Account(it->first, it->second, -1);
  it->second.deleting = true;
  return absl::OkStatus();
}

void StoreIndex::FinishDelete(absl::string_view trace_id) {
  MutexLock lock(&mu_);
  auto it = traces_.find(trace_id);
  if (it == traces_.end()) return;
  const bool was_deleting = it->second.deleting;
  if (!was_deleting) Account(it->first, it->second, -1);
  traces_.erase(it);
  if (was_deleting) delete_done_cv_.SignalAll();
}

void StoreIndex::AbortDelete(absl::string_view trace_id) {
  MutexLock lock(&mu_);
  auto it = traces_.find(trace_id);
  if (it == traces_.end() || !it->second.deleting) return;
  it->second.deleting = false;
  Account(it->first, it->second, +1);
  delete_done_cv_.SignalAll();
}

std::optional<StoredTrace> StoreIndex::Find(absl::string_view trace_id) const {
  MutexLock lock(&mu_);
  auto it = traces_.find(trace_id);
  if (it == traces_.end() || it->second.deleting) return std::nullopt;
  StoredTrace trace;
  trace.trace_id = it->first;
  trace.created = it->second.created;
  trace.job_id = it->second.job_id;
  trace.complete = it->second.complete;
  trace.awaiting_upload = it->second.awaiting_upload;
  trace.total_bytes = it->second.bytes;
  trace.files = it->second.files;
  auto pin = pins_.find(trace_id);
  trace.pins = pin == pins_.end() ? 0 : pin->second;
  return trace;
}

StoreTotals StoreIndex::Totals() const {
  MutexLock lock(&mu_);
  return totals_;
}

std::vector<std::string> StoreIndex::AwaitingUpload() const {
  std::vector<std::string> ids;
  MutexLock lock(&mu_);
  for (const auto& [id, entry] : traces_) {
    if (entry.awaiting_upload && !entry.deleting) ids.push_back(id);
  }
  return ids;
}

StoreIndex::Entry& StoreIndex::FindOrAdd(absl::string_view trace_id, absl::Time created) {
  auto it = traces_.find(trace_id);
  if (it == traces_.end()) {
    it = traces_.try_emplace(std::string(trace_id)).first;
    it->second.created = created;
    Account(it->first, it->second, +1);
  }
  return it->second;
}

void StoreIndex::SetFile(Entry& entry, absl::string_view name, uint64_t bytes) {
  auto it = std::lower_bound(entry.files.begin(), entry.files.end(), name,
                             [](const auto& file, absl::string_view n) { return file.first < n; });
  uint64_t old_bytes = 0;
  if (it != entry.files.end() && it->first == name) {
    old_bytes = it->second;
    it->second = bytes;
  } else {
    entry.files.emplace(it, std::string(name), bytes);
  }
  entry.bytes = entry.bytes - old_bytes + bytes;
  if (!entry.deleting) totals_.bytes = totals_.bytes - old_bytes + bytes;
}

void StoreIndex::Account(const std::string& trace_id, const Entry& entry, int sign) {
  auto add = [sign](uint64_t& total, uint64_t amount) {
    total = sign > 0 ? total + amount : total - std::min(total, amount);
  };
  add(totals_.traces, 1);
  add(totals_.bytes, entry.bytes);
  if (entry.complete) {
    add(totals_.complete, 1);
    if (sign > 0) {
      by_job_.emplace(entry.job_id, trace_id);
    } else {
      by_job_.erase({entry.job_id, trace_id});
    }
  }
  if (entry.awaiting_upload) add(totals_.awaiting_upload, 1);
}

bool StoreIndex::IsPinned(absl::string_view trace_id) const { return pins_.contains(trace_id); }

bool StoreIndex::IsDeleting(absl::string_view trace_id) const {
  auto it = traces_.find(trace_id);
  return it != traces_.end() && it->second.deleting;
}

}  // namespace gpuctl::daemon
