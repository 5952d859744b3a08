#include "daemon/rpc/get_trace_reactor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/excerpt.h"
#include "daemon/rpc/raw_messages.h"
#include "daemon/rpc/status_util.h"
#include "gpuctl/v1/trace_layout.h"

namespace gpuctl::daemon {

absl::Status ValidateTraceFileName(absl::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == ".." ||
      (absl::StrContains(name, '/') && !layout::IsManifestName(name)) ||
      absl::StrContains(name, '\0')) {
    return absl::InvalidArgumentError(absl::StrCat("invalid file name \"", Excerpt(name), "\""));
  }
  return absl::OkStatus();
}

GetTraceReactor::GetTraceReactor(TraceStore* store, Executor* io,
                                 const v1::GetTraceRequest& request, const TokenScope* scope)
    : store_(store), io_(io), request_(request), scope_(scope) {
  Schedule();
}

void GetTraceReactor::Schedule() {
  if (io_ == nullptr) {
    Step();
    return;
  }
  io_->Run([this] { Step(); });
}

void GetTraceReactor::OnWriteDone(bool ok) {
  if (!ok) {
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream closed by the client"));
    return;
  }
  Schedule();
}

void GetTraceReactor::Step() {
  if (cancelled_.load()) {
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
    return;
  }
  bool have_chunk = false;
  absl::Status s = NextChunk(&have_chunk);
  if (!s.ok()) {
    Finish(ToGrpcStatus(s));
  } else if (have_chunk) {
    chunk_bytes_ = SerializeReply(chunk_);
    StartWrite(&chunk_bytes_);
  } else {
    Finish(grpc::Status::OK);
  }
}

namespace {

// What a client is told about the trace's files when it names one the trace
// does not have: their names, bounded (a trace of many ranks has many).
std::string FileListText(const std::vector<std::string>& names) {
  constexpr size_t kMaxText = 512;
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (text.size() + names[i].size() > kMaxText) {
      absl::StrAppend(&text, " and ", names.size() - i, " more");
      break;
    }
    absl::StrAppend(&text, i == 0 ? "" : ", ", names[i]);
  }
  return text;
}

}  // namespace

absl::Status GetTraceReactor::ResolveFiles() {
  if (request_.trace_id().empty()) return absl::InvalidArgumentError("trace_id is required");
  for (const std::string& name : request_.files()) {
    if (absl::Status s = ValidateTraceFileName(name); !s.ok()) return s;
  }
  if (request_.bucket()) return ResolveBucketFiles();
  absl::StatusOr<v1::TraceManifest> manifest = store_->GetManifest(request_.trace_id());
  // The store's message names its paths, which are the daemon's business.
  if (absl::IsNotFound(manifest.status())) {
    return absl::NotFoundError(absl::StrCat("no trace ", request_.trace_id()));
  }
  if (!manifest.ok()) return manifest.status();
  // Outside a scoped token's reach, the trace does not exist for it.
  if (scope_ != nullptr && !ManifestInScope(*scope_, *manifest, manifest->trigger().token())) {
    return absl::NotFoundError(absl::StrCat("no trace ", request_.trace_id()));
  }
  trace_status_ = manifest->status();
  cancellation_ = manifest->cancellation();
  std::vector<std::string> stored = {store_->ServedManifestName(*manifest)};
  for (const v1::ProcessResult& result : manifest->results()) {
    if (result.file().empty()) continue;
    if (absl::Status s = ValidateTraceFileName(result.file()); !s.ok()) {
      return absl::InternalError(absl::StrCat("stored manifest lists an ", s.message()));
    }
    stored.push_back(result.file());
  }
  return SelectFiles(std::move(stored), /*any_manifest_name=*/true);
}

absl::Status GetTraceReactor::ResolveBucketFiles() {
  absl::StatusOr<std::vector<std::pair<std::string, v1::TraceManifest>>> manifests =
      store_->GetBucketManifests(request_.trace_id());
  if (absl::IsNotFound(manifests.status())) {
    return absl::NotFoundError(absl::StrCat("no trace ", request_.trace_id(), " in the bucket"));
  }
  if (!manifests.ok()) return manifests.status();
  std::vector<std::string> stored;
  bool first = true;
  for (const auto& [name, manifest] : *manifests) {
    // A host's part outside a scoped token's reach is left out, as if absent.
    if (scope_ != nullptr && !ManifestInScope(*scope_, manifest, manifest.trigger().token())) {
      continue;
    }
    if (first) {
      trace_status_ = manifest.status();
      cancellation_ = manifest.cancellation();
      first = false;
    }
    stored.push_back(name);
    for (const v1::ProcessResult& result : manifest.results()) {
      if (result.file().empty()) continue;
      if (absl::Status s = ValidateTraceFileName(result.file()); !s.ok()) {
        return absl::DataLossError(absl::StrCat("a manifest in the bucket lists an ", s.message()));
      }
      // Two hosts' manifests never name one file (names carry the host);
      // a repeat is served once.
      if (std::find(stored.begin(), stored.end(), result.file()) == stored.end()) {
        stored.push_back(result.file());
      }
    }
  }
  if (stored.empty()) return absl::NotFoundError(absl::StrCat("no trace ", request_.trace_id()));
  return SelectFiles(std::move(stored), /*any_manifest_name=*/false);
}

absl::Status GetTraceReactor::SelectFiles(std::vector<std::string> stored, bool any_manifest_name) {
  if (request_.files().empty()) {
    files_ = std::move(stored);
    return absl::OkStatus();
  }
  for (const std::string& name : request_.files()) {
    // Any manifest name ("manifest.json" too) names the trace's manifest;
    // from the bucket, each host's manifest is named by its own path.
    const bool listed = std::find(stored.begin(), stored.end(), name) != stored.end();
    if (!listed && !(any_manifest_name && layout::IsManifestName(name))) {
      return absl::NotFoundError(absl::StrCat("trace ", request_.trace_id(), " has no file \"",
                                              Excerpt(name),
                                              "\"; its files: ", FileListText(stored)));
    }
    files_.push_back(name);
  }
  return absl::OkStatus();
}

absl::Status GetTraceReactor::NextChunk(bool* have_chunk) {
  *have_chunk = false;
  if (!resolved_) {
    resolved_ = true;
    if (absl::Status s = ResolveFiles(); !s.ok()) return s;
  }
  while (true) {
    if (reader_ == nullptr) {
      if (next_file_ >= files_.size()) return absl::OkStatus();
      current_file_ = files_[next_file_++];
      absl::StatusOr<std::unique_ptr<TraceFileReader>> reader =
          request_.bucket() ? store_->OpenInBucket(request_.trace_id(), current_file_)
                            : store_->Open(request_.trace_id(), current_file_);
      if (absl::IsNotFound(reader.status())) {
        return absl::NotFoundError(absl::StrCat("trace ", request_.trace_id(), " lists \"",
                                                current_file_, "\" but it is not stored"));
      }
      if (!reader.ok()) return reader.status();
      reader_ = std::move(*reader);
      offset_ = 0;
      sent_any_of_current_ = false;
    }
    chunk_.Clear();
    if (absl::Status s = reader_->Read(kTraceChunkBytes, chunk_.mutable_data()); !s.ok()) return s;
    uint64_t size = reader_->size();
    if (chunk_.data().empty()) {
      reader_.reset();
      if (offset_ != size) {
        return absl::DataLossError(
            absl::StrCat(current_file_, " ended at ", offset_, " bytes, expected ", size));
      }
      // An empty file still gets one chunk so that the client creates it.
      if (sent_any_of_current_) continue;
    }
    if (chunk_.data().size() > kTraceChunkBytes || offset_ + chunk_.data().size() > size) {
      return absl::DataLossError(absl::StrCat(current_file_, " grew past its size of ", size));
    }
    chunk_.set_file(current_file_);
    chunk_.set_offset(offset_);
    chunk_.set_file_size(size);
    if (!sent_first_chunk_) {
      sent_first_chunk_ = true;
      chunk_.set_trace_status(trace_status_);
      if (trace_status_ == v1::TRACE_STATUS_CANCELLED)
        *chunk_.mutable_cancellation() = cancellation_;
    }
    offset_ += chunk_.data().size();
    sent_any_of_current_ = true;
    *have_chunk = true;
    return absl::OkStatus();
  }
}

}  // namespace gpuctl::daemon
