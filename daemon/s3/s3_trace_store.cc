#include "daemon/s3/s3_trace_store.h"

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/common/log.h"
#include "daemon/common/trace_id.h"
#include "daemon/s3/remote_listing.h"
#include "daemon/s3/remote_trace.h"
#include "daemon/s3/trace_object_key.h"
#include "daemon/store/trace_file_name.h"
#include "gpuctl/v1/trace_layout.h"

namespace gpuctl::s3 {
namespace {

// How long Shutdown waits for an upload in flight before leaving it.
constexpr absl::Duration kUploadStopGrace = absl::Seconds(2);
// Bytes fetched per ranged GET: fewer round trips than one per Read call.
constexpr uint64_t kRemoteReadAhead = 8 * kMiB;

// Reads one object of the bucket in ranged GETs, keeping the trace pinned.
class RemoteFileReader final : public daemon::TraceFileReader {
 public:
  RemoteFileReader(std::shared_ptr<S3Client> client, std::string key, uint64_t size,
                   daemon::TracePin pin)
      : client_(std::move(client)), key_(std::move(key)), size_(size), pin_(std::move(pin)) {}

  uint64_t size() const override { return size_; }

  absl::Status Read(size_t max_bytes, std::string* out) override {
    out->clear();
    if (buffered_ == buffer_.size()) {
      if (absl::Status st = Fill(max_bytes); !st.ok()) return st;
    }
    const size_t n = std::min(max_bytes, buffer_.size() - buffered_);
    out->assign(buffer_, buffered_, n);
    buffered_ += n;
    return absl::OkStatus();
  }

 private:
  absl::Status Fill(size_t max_bytes) {
    buffer_.clear();
    buffered_ = 0;
    if (offset_ >= size_ || max_bytes == 0) return absl::OkStatus();
    const uint64_t length =
        std::min(size_ - offset_, std::max<uint64_t>(max_bytes, kRemoteReadAhead));
    absl::Status st = client_->GetObject(
        key_,
        [this](absl::string_view chunk) {
          buffer_.append(chunk.data(), chunk.size());
          return absl::OkStatus();
        },
        ByteRange{offset_, length});
    if (!st.ok()) return st;
    if (buffer_.size() != length) {
      return absl::DataLossError(absl::StrCat("S3 object ", key_, " returned ", buffer_.size(),
                                              " bytes at offset ", offset_, ", expected ", length));
    }
    offset_ += length;
    return absl::OkStatus();
  }

  const std::shared_ptr<S3Client> client_;
  const std::string key_;
  const uint64_t size_;
  daemon::TracePin pin_;
  uint64_t offset_ = 0;  // of the next fetch
  std::string buffer_;
  size_t buffered_ = 0;  // bytes of buffer_ already returned
};

// The first of the traces a shutdown left, for the log.
std::string LeftIds(const std::vector<std::string>& left) {
  constexpr size_t kMaxLogged = 20;
  if (left.size() <= kMaxLogged) return absl::StrJoin(left, ",");
  return absl::StrCat(absl::StrJoin(left.begin(), left.begin() + kMaxLogged, ","), ",... (",
                      left.size() - kMaxLogged, " more)");
}

}  // namespace

std::unique_ptr<S3TraceStore> S3TraceStore::Create(std::unique_ptr<daemon::LocalTraceStore> spool,
                                                   std::unique_ptr<S3Client> client,
                                                   S3StoreOptions options, TraceUploaderDeps deps) {
  std::shared_ptr<daemon::LocalTraceStore> shared_spool = std::move(spool);
  std::shared_ptr<S3Client> shared_client = std::move(client);
  RealClock real_clock;
  Clock* const clock = deps.clock;
  const absl::Time started = (clock != nullptr ? clock : &real_clock)->Now();
  auto on_orphan_sweep = deps.on_orphan_sweep;
  auto uploader =
      std::make_shared<TraceUploader>(shared_spool, shared_client, options, std::move(deps));
  size_t resumed = 0;
  for (const std::string& id : shared_spool->AwaitingUpload()) {
    std::optional<daemon::StoredTrace> trace = shared_spool->Find(id);
    if (!trace.has_value() || !trace->complete) continue;
    uploader->Enqueue(id);
    ++resumed;
  }
  if (resumed > 0) LogInfo("resuming trace uploads", {{"traces", resumed}});
  TraceUploader::Start(uploader);
  std::shared_ptr<OrphanedUploadSweep> sweep = OrphanedUploadSweep::Start(
      shared_client, options.hostname, started - kOrphanedUploadMargin, std::move(on_orphan_sweep));
  return std::unique_ptr<S3TraceStore>(
      new S3TraceStore(std::move(shared_spool), std::move(shared_client), std::move(options),
                       std::move(uploader), std::move(sweep), clock));
}

S3TraceStore::S3TraceStore(std::shared_ptr<daemon::LocalTraceStore> spool,
                           std::shared_ptr<S3Client> client, S3StoreOptions options,
                           std::shared_ptr<TraceUploader> uploader,
                           std::shared_ptr<OrphanedUploadSweep> sweep, Clock* clock)
    : clock_(clock != nullptr ? clock : &real_clock_),
      spool_(std::move(spool)),
      client_(std::move(client)),
      options_(std::move(options)),
      manifest_name_(layout::ManifestPath(daemon::TraceFileHost(options_.hostname))),
      uploader_(std::move(uploader)),
      sweep_(std::move(sweep)) {}

S3TraceStore::~S3TraceStore() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  sweep_->Stop(kUploadStopGrace);
  uploader_->Stop(kUploadStopGrace);
}

void S3TraceStore::BeginShutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (flush_begun_) return;
    flush_begun_ = true;
  }
  const size_t pending = uploader_->pending();
  if (pending > 0 && options_.shutdown_wait > absl::ZeroDuration()) {
    LogInfo("uploading pending traces before exit",
            {{"traces", pending}, {"shutdown_wait", absl::FormatDuration(options_.shutdown_wait)}});
  }
  uploader_->BeginFlush(options_.shutdown_wait);
}

FlushReport S3TraceStore::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return {};
    stopped_ = true;
  }
  BeginShutdown();
  // The sweep is housekeeping: it need not outlast the uploads.
  sweep_->Stop(kUploadStopGrace);
  FlushReport report = uploader_->Flush();
  uploader_->Stop(kUploadStopGrace);
  if (report.left.empty()) {
    if (report.uploaded > 0) LogInfo("pending traces uploaded", {{"traces", report.uploaded}});
    return report;
  }
  LogWarning("traces left awaiting upload in the spool; a start with this spool uploads them",
             {{"uploaded", report.uploaded},
              {"left", report.left.size()},
              {"trace_ids", LeftIds(report.left)},
              {"spool", spool_->root()},
              {"shutdown_wait", absl::FormatDuration(options_.shutdown_wait)}});
  return report;
}

std::string S3TraceStore::Location(absl::string_view trace_id) const {
  if (trace_id.empty()) {
    return absl::StrCat(uploader_->RemoteRoot(), " (spooled in ", spool_->root(), ")");
  }
  std::optional<daemon::StoredTrace> trace = spool_->Find(trace_id);
  if (trace.has_value() && trace->complete && !trace->awaiting_upload) {
    return uploader_->RemoteLocation(trace_id);
  }
  return spool_->Location(trace_id);
}

absl::Status S3TraceStore::PutFile(absl::string_view trace_id, absl::string_view name,
                                   absl::string_view data) {
  return spool_->PutFile(trace_id, name, data);
}

absl::Status S3TraceStore::PutManifest(const v1::TraceManifest& manifest) {
  const std::string& trace_id = manifest.trace_id();
  if (!IsValidTraceId(trace_id)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid trace id \"", trace_id, "\""));
  }
  // Marked first: from the moment the trace is complete, it is never
  // deleted before it is in the bucket, restarts included.
  if (absl::Status st = spool_->SetAwaitingUpload(trace_id, true); !st.ok()) return st;
  v1::TraceManifest pending = manifest;
  const std::string local = spool_->Location(trace_id);
  v1::TraceStorage* storage = pending.mutable_storage();
  storage->set_state(v1::STORAGE_STATE_UPLOAD_PENDING);
  storage->set_local_location(local);
  storage->set_remote_location(uploader_->RemoteLocation(trace_id));
  storage->set_remote_endpoint(uploader_->endpoint());
  pending.set_location(local);
  if (absl::Status st = spool_->PutManifest(pending); !st.ok()) return st;
  std::shared_ptr<absl::Notification> attempted = uploader_->Enqueue(trace_id);
  if (options_.upload_wait > absl::ZeroDuration()) {
    attempted->WaitForNotificationWithTimeout(options_.upload_wait);
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::TraceManifest> S3TraceStore::GetManifest(absl::string_view trace_id) {
  absl::StatusOr<v1::TraceManifest> local = spool_->GetManifest(trace_id);
  if (!absl::IsNotFound(local.status()) || !OnlyInBucket(trace_id)) return local;
  return ReadRemoteManifest(*client_, trace_id, manifest_name_);
}

std::string S3TraceStore::ServedManifestName(const v1::TraceManifest& manifest) const {
  if (!OnlyInBucket(manifest.trace_id())) return ManifestName();
  const std::string host = daemon::TraceFileHost(manifest.host());
  return layout::IsManifestHost(host) ? layout::ManifestPath(host) : ManifestName();
}

bool S3TraceStore::OnlyInBucket(absl::string_view trace_id) const {
  return IsValidTraceId(trace_id) && !spool_->Find(trace_id).has_value();
}

absl::StatusOr<v1::ListTracesResponse> S3TraceStore::List(const v1::ListTracesRequest& request) {
  if (!request.bucket()) return spool_->List(request);
  absl::StatusOr<v1::ListTracesResponse> listed =
      ListBucketTraces(*client_, request, manifest_name_, clock_->Now());
  if (!listed.ok()) return listed.status();
  for (v1::TraceManifest& trace : *listed->mutable_traces()) {
    if (trace.location().empty()) trace.set_location(uploader_->RemoteLocation(trace.trace_id()));
  }
  return listed;
}

absl::StatusOr<std::unique_ptr<daemon::TraceFileReader>> S3TraceStore::Open(
    absl::string_view trace_id, absl::string_view name) {
  absl::StatusOr<std::unique_ptr<daemon::TraceFileReader>> local = spool_->Open(trace_id, name);
  if (local.ok()) return local;
  // A spool of the other layout does not know the manifest's name at all.
  const bool manifest = layout::IsManifestName(name);
  if (!absl::IsNotFound(local.status()) && !(manifest && absl::IsInvalidArgument(local.status()))) {
    return local;
  }
  // Only an uploaded trace has its files in the bucket, or one the spool
  // does not know.
  std::optional<daemon::StoredTrace> trace = spool_->Find(trace_id);
  const bool uploaded = trace.has_value() && trace->complete && !trace->awaiting_upload;
  const bool only_in_bucket = !trace.has_value() && IsValidTraceId(trace_id);
  if (!uploaded && !only_in_bucket) return local;
  return OpenRemote(trace_id, name, only_in_bucket);
}

absl::StatusOr<std::unique_ptr<daemon::TraceFileReader>> S3TraceStore::OpenRemote(
    absl::string_view trace_id, absl::string_view name, bool only_in_bucket) {
  absl::StatusOr<daemon::TracePin> pin = spool_->Pin(trace_id);
  if (!pin.ok()) return pin.status();
  // This host's manifest is at its own key, or at the one key of the legacy
  // layout in a bucket written before; asked by either name, either serves.
  // So does the manifest of a trace found in the bucket only, under the
  // name ServedManifestName gave it.
  std::vector<std::string> names = {std::string(name)};
  if (name == layout::kLegacyManifestName) names.push_back(manifest_name_);
  if (name == manifest_name_ || (only_in_bucket && !layout::ManifestPathHost(name).empty())) {
    names.emplace_back(layout::kLegacyManifestName);
  }
  absl::Status missing;
  for (const std::string& file : names) {
    absl::StatusOr<std::string> key = TraceObjectKey(client_->config().prefix, trace_id, file);
    if (!key.ok()) return key.status();
    absl::StatusOr<ObjectInfo> info = client_->HeadObject(*key);
    if (info.ok()) {
      return std::unique_ptr<daemon::TraceFileReader>(
          new RemoteFileReader(client_, *std::move(key), info->size, *std::move(pin)));
    }
    if (!absl::IsNotFound(info.status())) return info.status();
    if (missing.ok()) missing = info.status();
  }
  return missing;
}

absl::StatusOr<std::vector<std::pair<std::string, v1::TraceManifest>>>
S3TraceStore::GetBucketManifests(absl::string_view trace_id) {
  if (!IsValidTraceId(trace_id)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid trace id \"", trace_id, "\""));
  }
  return ReadRemoteManifests(*client_, trace_id);
}

absl::StatusOr<std::unique_ptr<daemon::TraceFileReader>> S3TraceStore::OpenInBucket(
    absl::string_view trace_id, absl::string_view name) {
  if (!IsValidTraceId(trace_id)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid trace id \"", trace_id, "\""));
  }
  // Read as a trace the spool does not know: a manifest asked by its host's
  // path is that object, or the legacy manifest.json of an older bucket.
  return OpenRemote(trace_id, name, /*only_in_bucket=*/true);
}

absl::StatusOr<daemon::TracePin> S3TraceStore::Pin(absl::string_view trace_id) {
  return spool_->Pin(trace_id);
}

absl::Status S3TraceStore::SetAwaitingUpload(absl::string_view trace_id, bool awaiting) {
  return spool_->SetAwaitingUpload(trace_id, awaiting);
}

size_t S3TraceStore::EnforceRetention() { return spool_->EnforceRetention(); }

}  // namespace gpuctl::s3
