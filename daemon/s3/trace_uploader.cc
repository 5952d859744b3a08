#include "daemon/s3/trace_uploader.h"

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/core/proto_time.h"
#include "daemon/s3/s3_config.h"
#include "daemon/s3/trace_object_key.h"
#include "daemon/store/local_store.h"
#include "daemon/store/trace_file_name.h"
#include "gpuctl/v1/trace_layout.h"

namespace gpuctl::s3 {
namespace {

std::string ContentTypeOf(absl::string_view file) {
  if (absl::EndsWith(file, ".gz")) return "application/gzip";
  if (absl::EndsWith(file, ".json")) return "application/json";
  return "application/octet-stream";
}

// Credentials may be fixed while the daemon runs (a rotated credentials
// file), so these are retried too, but at the longest interval.
bool IsAuthError(const absl::Status& status) {
  return absl::IsUnauthenticated(status) || absl::IsPermissionDenied(status);
}

}  // namespace

TraceUploader::TraceUploader(std::shared_ptr<daemon::LocalTraceStore> spool,
                             std::shared_ptr<S3Client> client, S3StoreOptions options,
                             TraceUploaderDeps deps)
    : spool_(std::move(spool)),
      client_(std::move(client)),
      options_(std::move(options)),
      manifest_name_(layout::ManifestPath(daemon::TraceFileHost(options_.hostname))),
      deps_(std::move(deps)),
      clock_(deps_.clock != nullptr ? deps_.clock : &real_clock_),
      waiter_(clock_, deps_.timers, &mu_, &wake_),
      flush_waiter_(clock_, deps_.timers, &mu_, &drained_) {}

TraceUploader::~TraceUploader() {
  // Only reached without Stop when Start was never called, or on the
  // uploader's own thread after Stop let it go.
  if (thread_.joinable()) thread_.detach();
}

void TraceUploader::Start(const std::shared_ptr<TraceUploader>& self) {
  self->thread_ = std::thread([self] {
    self->Run();
    self->exited_.Notify();
  });
}

std::shared_ptr<absl::Notification> TraceUploader::Enqueue(absl::string_view trace_id) {
  auto done = std::make_shared<absl::Notification>();
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    done->Notify();
    return done;
  }
  Pending& pending = pending_[trace_id];
  if (pending.queued_at == absl::InfiniteFuture()) pending.queued_at = clock_->Now();
  if (!pending.in_flight) pending.due = absl::InfinitePast();
  if (flushing_) {
    done->Notify();
  } else {
    pending.waiters.push_back(done);
  }
  wake_.Signal();
  return done;
}

void TraceUploader::BeginFlush(absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  if (flushing_ || stopping_) return;
  flushing_ = true;
  flush_deadline_ = clock_->Now() + wait;
  for (auto& [id, pending] : pending_) {
    pending.failures = 0;
    if (!pending.in_flight) pending.due = absl::InfinitePast();
    for (auto& waiter : pending.waiters) waiter->Notify();
    pending.waiters.clear();
  }
  wake_.Signal();
}

FlushReport TraceUploader::Flush() {
  BeginFlush(absl::ZeroDuration());
  absl::MutexLock lock(&mu_);
  while (!pending_.empty() && !stopping_ && clock_->Now() < flush_deadline_) {
    flush_waiter_.Wait(flush_deadline_);
  }
  FlushReport report;
  report.uploaded = flushed_;
  for (const auto& [id, pending] : pending_) report.left.push_back(id);
  return report;
}

void TraceUploader::Stop(absl::Duration grace) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [id, pending] : pending_) {
      for (auto& waiter : pending.waiters) waiter->Notify();
      pending.waiters.clear();
    }
    wake_.SignalAll();
    drained_.SignalAll();
  }
  if (!thread_.joinable()) return;
  if (exited_.WaitForNotificationWithTimeout(grace)) {
    thread_.join();
  } else {
    LogWarning("abandoning an upload in flight; the trace stays queued for the next start",
               {{"grace", absl::FormatDuration(grace)}});
    thread_.detach();
  }
}

size_t TraceUploader::pending() const {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

absl::Time TraceUploader::oldest_pending_since() const {
  absl::MutexLock lock(&mu_);
  absl::Time oldest = absl::InfiniteFuture();
  for (const auto& [id, pending] : pending_) oldest = std::min(oldest, pending.queued_at);
  return oldest;
}

std::string TraceUploader::RemoteRoot() const {
  const S3Config& config = client_->config();
  return config.prefix.empty() ? absl::StrCat("s3://", config.bucket)
                               : absl::StrCat("s3://", config.bucket, "/", config.prefix);
}

std::string TraceUploader::RemoteLocation(absl::string_view trace_id) const {
  absl::StatusOr<std::string> prefix = TraceObjectPrefix(client_->config().prefix, trace_id);
  if (!prefix.ok()) return RemoteRoot();
  return absl::StrCat("s3://", client_->config().bucket, "/", *prefix);
}

void TraceUploader::Run() {
  mu_.Lock();
  std::string trace_id;
  while (TakeNext(&trace_id)) {
    uint32_t attempt = 0;
    bool gone = false;
    mu_.Unlock();
    absl::Status status = Upload(trace_id, &attempt, &gone);
    if (!status.ok() && !gone) RecordFailure(trace_id, attempt, status);
    mu_.Lock();
    Finish(trace_id, status, gone);
    if (deps_.on_attempt) {
      mu_.Unlock();
      deps_.on_attempt(trace_id, status);
      mu_.Lock();
    }
  }
  mu_.Unlock();
}

bool TraceUploader::TakeNext(std::string* trace_id) {
  while (!stopping_) {
    auto next = pending_.end();
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      if (next == pending_.end() || it->second.due < next->second.due) next = it;
    }
    if (next == pending_.end()) {
      wake_.Wait(&mu_);
      continue;
    }
    if (next->second.due > clock_->Now()) {
      waiter_.Wait(next->second.due);
      continue;
    }
    next->second.in_flight = true;
    *trace_id = next->first;
    return true;
  }
  return false;
}

void TraceUploader::Finish(const std::string& trace_id, const absl::Status& status, bool gone) {
  auto it = pending_.find(trace_id);
  if (it == pending_.end()) return;
  Pending& pending = it->second;
  pending.in_flight = false;
  std::vector<std::shared_ptr<absl::Notification>> waiters = std::move(pending.waiters);
  pending.waiters.clear();
  if (status.ok() || gone) {
    if (status.ok() && flushing_) ++flushed_;
    pending_.erase(it);
    if (pending_.empty()) drained_.SignalAll();
  } else {
    ++pending.failures;
    pending.due = clock_->Now() + RetryDelay(pending.failures, status);
  }
  for (auto& waiter : waiters) waiter->Notify();
}

absl::Duration TraceUploader::RetryDelay(int failures, const absl::Status& error) {
  const absl::Duration base =
      IsAuthError(error)
          ? options_.upload_retry_max
          : ExponentialBackoff(options_.upload_retry_initial, options_.upload_retry_max, failures);
  absl::Duration half = base / 2;
  if (deps_.jitter) return half + deps_.jitter(half);
  static thread_local absl::BitGen gen;
  return half + absl::Nanoseconds(absl::Uniform<int64_t>(absl::IntervalClosed, gen, 0,
                                                         absl::ToInt64Nanoseconds(half)));
}

absl::Status TraceUploader::Upload(const std::string& trace_id, uint32_t* attempt, bool* gone) {
  absl::StatusOr<daemon::TracePin> pin = spool_->Pin(trace_id);
  std::optional<daemon::StoredTrace> trace = spool_->Find(trace_id);
  if (!pin.ok() || !trace.has_value() || !trace->awaiting_upload) {
    // Deleted, or uploaded meanwhile: nothing left to do.
    *gone = true;
    return absl::NotFoundError(absl::StrCat("trace ", trace_id, " is not awaiting upload"));
  }
  absl::StatusOr<v1::TraceManifest> manifest = spool_->GetManifest(trace_id);
  if (!manifest.ok()) return manifest.status();
  *attempt = manifest->storage().upload_attempts() + 1;
  if (absl::Status st = UploadFiles(*trace); !st.ok()) return st;

  v1::TraceManifest final_manifest = *std::move(manifest);
  const std::string remote = RemoteLocation(trace_id);
  v1::TraceStorage* storage = final_manifest.mutable_storage();
  storage->set_state(v1::STORAGE_STATE_UPLOADED);
  storage->set_remote_location(remote);
  storage->set_remote_endpoint(endpoint());
  storage->clear_upload_error();
  storage->set_upload_attempts(*attempt);
  *storage->mutable_uploaded_at() = daemon::ToProtoTimestamp(clock_->Now());
  storage->set_local_location(options_.keep_local ? spool_->Location(trace_id) : "");
  final_manifest.set_location(remote);
  // This host's own key: the hosts of a fan-out trace share the trace's
  // prefix, each with its manifest beside the others'.
  absl::StatusOr<std::string> key =
      TraceObjectKey(client_->config().prefix, trace_id, manifest_name_);
  if (!key.ok()) return key.status();
  // Last of this host's objects: a listed manifest means every file it
  // lists is there.
  PutOptions put;
  put.content_type = "application/json";
  absl::StatusOr<std::string> json = daemon::EncodeManifest(final_manifest);
  if (!json.ok()) return json.status();
  if (absl::Status st = client_->PutObject(*key, *json, put); !st.ok()) return st;
  if (absl::Status st = spool_->PutManifest(final_manifest); !st.ok()) return st;
  if (absl::Status st = spool_->SetAwaitingUpload(trace_id, false); !st.ok()) return st;
  uint64_t uploaded = json->size();
  for (const auto& [name, bytes] : trace->files) {
    if (!layout::IsManifestName(name)) uploaded += bytes;
  }
  uploaded_bytes_.fetch_add(uploaded);
  LogInfo("trace uploaded", {{"trace_id", trace_id},
                             {"location", remote},
                             {"endpoint", endpoint()},
                             {"bytes", trace->total_bytes},
                             {"attempt", *attempt}});
  if (!options_.keep_local) {
    if (absl::Status st = spool_->RemoveDataFiles(trace_id); !st.ok()) {
      LogWarning("could not remove the uploaded trace's local files",
                 {{"trace_id", trace_id}, {"error", st.ToString()}});
    }
  }
  return absl::OkStatus();
}

absl::Status TraceUploader::UploadFiles(const daemon::StoredTrace& trace) {
  const std::string dir = spool_->Location(trace.trace_id);
  for (const auto& [name, bytes] : trace.files) {
    if (layout::IsManifestName(name)) continue;  // goes up last, from memory
    absl::StatusOr<std::string> key =
        TraceObjectKey(client_->config().prefix, trace.trace_id, name);
    if (!key.ok()) return key.status();
    PutOptions put;
    put.content_type = ContentTypeOf(name);
    if (absl::Status st = client_->PutObjectFromFile(*key, absl::StrCat(dir, "/", name), put);
        !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

void TraceUploader::RecordFailure(const std::string& trace_id, uint32_t attempt,
                                  const absl::Status& error) {
  LogWarning("trace upload failed; retrying", {{"trace_id", trace_id},
                                               {"attempt", attempt},
                                               {"endpoint", endpoint()},
                                               {"error", error.ToString()}});
  if (attempt == 0) return;  // the manifest could not be read
  absl::StatusOr<v1::TraceManifest> manifest = spool_->GetManifest(trace_id);
  if (!manifest.ok()) return;
  v1::TraceStorage* storage = manifest->mutable_storage();
  storage->set_state(v1::STORAGE_STATE_UPLOAD_PENDING);
  storage->set_upload_error(std::string(error.message()));
  storage->set_upload_attempts(attempt);
  if (absl::Status st = spool_->PutManifest(*manifest); !st.ok()) {
    LogWarning("could not record the upload failure in the manifest",
               {{"trace_id", trace_id}, {"error", st.ToString()}});
  }
}

}  // namespace gpuctl::s3
