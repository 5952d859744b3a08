#include "daemon/store/local_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/excerpt.h"
#include "daemon/common/log.h"
#include "daemon/common/posix_file.h"
#include "daemon/common/trace_id.h"
#include "daemon/store/list_request.h"
#include "daemon/store/manifest_job_id.h"
#include "daemon/store/trace_file_name.h"
#include "google/protobuf/util/json_util.h"
#include "gpuctl/v1/trace_layout.h"

namespace gpuctl::daemon {
namespace {

constexpr absl::string_view kTempPrefix = ".tmp-";
constexpr mode_t kDirMode = 0750;
constexpr mode_t kFileMode = 0640;
constexpr size_t kMaxManifestBytes = 16 << 20;

absl::Status CheckTraceId(absl::string_view trace_id) {
  if (!IsValidTraceId(trace_id)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid trace id \"", Excerpt(trace_id), "\""));
  }
  return absl::OkStatus();
}

absl::Status CheckIds(absl::string_view trace_id, absl::string_view name) {
  if (auto st = CheckTraceId(trace_id); !st.ok()) return st;
  if (!layout::IsTraceFilePath(name)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid file name \"", Excerpt(name), "\""));
  }
  return absl::OkStatus();
}

absl::Status NoSuchTrace(absl::string_view trace_id) {
  return absl::NotFoundError(absl::StrCat("no trace ", trace_id));
}

absl::Time CreatedAt(absl::string_view trace_id) {
  return absl::FromUnixMillis(TraceIdUnixMillis(trace_id));
}

TracePin MakePin(std::shared_ptr<StoreIndex> index, absl::string_view trace_id) {
  return TracePin([index = std::move(index), id = std::string(trace_id)]() { index->Unpin(id); });
}

class LocalFileReader final : public TraceFileReader {
 public:
  LocalFileReader(int fd, uint64_t size, TracePin pin)
      : fd_(fd), size_(size), pin_(std::move(pin)) {}
  uint64_t size() const override { return size_; }
  absl::Status Read(size_t max_bytes, std::string* out) override {
    out->resize(std::min<uint64_t>(max_bytes, size_ - std::min(size_, offset_)));
    size_t done = 0;
    while (done < out->size()) {
      ssize_t n = ::pread(fd_.get(), out->data() + done, out->size() - done,
                          static_cast<off_t>(offset_ + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoError(errno, "reading", "trace file");
      if (n == 0) break;  // truncated underneath us
      done += static_cast<size_t>(n);
    }
    out->resize(done);
    offset_ += done;
    return absl::OkStatus();
  }

 private:
  UniqueFd fd_;
  uint64_t size_;
  uint64_t offset_ = 0;
  TracePin pin_;
};

// Reads a file of at most `max_bytes`, relative to `dir_fd` (or AT_FDCWD).
absl::StatusOr<std::string> ReadSmallFile(int dir_fd, const std::string& path, size_t max_bytes) {
  UniqueFd fd(::openat(dir_fd, path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) return ErrnoError(errno, "opening", path);
  std::string data;
  char buf[64 * 1024];
  while (true) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, "reading", path);
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > max_bytes) {
      return absl::FailedPreconditionError(absl::StrCat(path, " exceeds ", max_bytes, " bytes"));
    }
  }
  return data;
}

absl::StatusOr<v1::TraceManifest> ParseManifest(const std::string& json, absl::string_view path) {
  v1::TraceManifest manifest;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  auto st = google::protobuf::util::JsonStringToMessage(json, &manifest, options);
  if (!st.ok()) {
    return absl::DataLossError(absl::StrCat("corrupt manifest ", path, ": ", st.ToString()));
  }
  return manifest;
}

// The job id in the manifest `manifest` (relative to the trace directory
// `dir_fd`, `dir`).
absl::StatusOr<std::string> ReadJobId(int dir_fd, const std::string& dir,
                                      const std::string& manifest) {
  auto json = ReadSmallFile(dir_fd, manifest, kMaxManifestBytes);
  if (!json.ok()) return json.status();
  if (auto job = ManifestJobId(*json); job.ok()) return job;
  // The full parser says precisely what is wrong.
  auto parsed = ParseManifest(*json, absl::StrCat(dir, "/", manifest));
  if (!parsed.ok()) return parsed.status();
  return std::move(*parsed->mutable_job_id());
}

bool IsRegularFileAt(int dir_fd, const char* name, uint64_t* size) {
  struct stat st;
  if (::fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return false;
  *size = static_cast<uint64_t>(st.st_size);
  return true;
}

// The manifests in a trace's metadata directory (layout::kMetadataDir),
// as paths relative to the trace directory, sorted; temporary files there
// are removed (counted in `temp_removed`, when given).
std::vector<std::pair<std::string, uint64_t>> ScanMetadataDir(const std::string& dir,
                                                              size_t* temp_removed) {
  std::vector<std::pair<std::string, uint64_t>> manifests;
  const std::string meta = absl::StrCat(dir, "/", layout::kMetadataDir);
  DIR* d = ::opendir(meta.c_str());
  if (d == nullptr) return manifests;
  const int meta_fd = ::dirfd(d);
  while (struct dirent* e = ::readdir(d)) {
    absl::string_view name = e->d_name;
    uint64_t size = 0;
    if (absl::StartsWith(name, kTempPrefix)) {
      if (temp_removed != nullptr && ::unlinkat(meta_fd, e->d_name, 0) == 0) ++*temp_removed;
    } else if (std::string path = absl::StrCat(layout::kMetadataDir, "/", name);
               layout::IsManifestName(path) && IsRegularFileAt(meta_fd, e->d_name, &size)) {
      manifests.emplace_back(std::move(path), size);
    }
  }
  ::closedir(d);
  std::sort(manifests.begin(), manifests.end());
  return manifests;
}

// Reads one trace directory for the index, removing temporary files
// (counted in `temp_removed`). The trace is complete if it has a manifest.
absl::StatusOr<StoredTrace> ScanTraceDir(const std::string& dir, const std::string& id,
                                         size_t* temp_removed) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ErrnoError(errno, "listing", dir);
  const int dir_fd = ::dirfd(d);
  StoredTrace trace;
  trace.trace_id = id;
  trace.created = CreatedAt(id);
  // The manifest to read the job id from: this layout's first, else the
  // old top-level one. The index lists a manifest as kManifestFileName.
  std::string manifest;
  uint64_t manifest_bytes = 0;
  for (auto& [path, size] : ScanMetadataDir(dir, temp_removed)) {
    if (manifest.empty()) manifest = path;
    manifest_bytes += size;
  }
  while (struct dirent* e = ::readdir(d)) {
    absl::string_view name = e->d_name;
    uint64_t size = 0;
    if (absl::StartsWith(name, kTempPrefix)) {
      if (::unlinkat(dir_fd, e->d_name, 0) == 0) ++*temp_removed;
    } else if (name == kAwaitingUploadMark) {
      trace.awaiting_upload = true;
    } else if (name == layout::kLegacyManifestName && IsRegularFileAt(dir_fd, e->d_name, &size)) {
      if (manifest.empty()) manifest = std::string(name);
      manifest_bytes += size;
    } else if (IsValidStoreFileName(name) && name != layout::kMetadataDir &&
               IsRegularFileAt(dir_fd, e->d_name, &size)) {
      trace.files.emplace_back(std::string(name), size);
    }
  }
  trace.complete = !manifest.empty();
  if (trace.complete) {
    trace.files.emplace_back(std::string(kManifestFileName), manifest_bytes);
    absl::StatusOr<std::string> job = ReadJobId(dir_fd, dir, manifest);
    // Still indexed (List skips it, saying why) and evicted like the others.
    if (job.ok()) {
      trace.job_id = std::move(*job);
    } else {
      LogWarning("unreadable manifest", {{"trace_id", id}, {"error", job.status().ToString()}});
    }
  }
  ::closedir(d);
  return trace;
}

}  // namespace

bool IsValidStoreFileName(absl::string_view name) { return layout::IsSafeFileName(name); }

absl::StatusOr<std::string> EncodeManifest(const v1::TraceManifest& manifest) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  std::string json;
  auto encoded = google::protobuf::util::MessageToJsonString(manifest, &json, options);
  if (!encoded.ok()) {
    return absl::InternalError(absl::StrCat("encoding manifest: ", encoded.ToString()));
  }
  return json;
}

LocalTraceStore::LocalTraceStore(std::string root, const LocalStoreOptions& options)
    : root_(std::move(root)),
      manifest_name_(layout::ManifestPath(TraceFileHost(options.host))),
      retention_(options.retention),
      clock_(options.clock != nullptr ? options.clock : &real_clock_) {}

absl::StatusOr<std::unique_ptr<LocalTraceStore>> LocalTraceStore::Create(
    const std::string& root, const LocalStoreOptions& options) {
  if (root.empty()) return absl::InvalidArgumentError("trace store root is empty");
  std::string clean = root;
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  if (auto st = MakeDirs(clean, kDirMode); !st.ok()) return st;
  std::unique_ptr<LocalTraceStore> store(new LocalTraceStore(clean, options));
  if (auto st = store->Scan(options.remove_incomplete); !st.ok()) return st;
  return store;
}

absl::Status LocalTraceStore::Scan(bool remove_incomplete) {
  const absl::Time start = clock_->Now();
  absl::StatusOr<std::vector<std::string>> ids = ListDir(root_);
  if (!ids.ok()) return ids.status();
  size_t temp_removed = 0;
  size_t incomplete_removed = 0;
  for (const std::string& id : *ids) {
    if (!IsValidTraceId(id)) continue;
    absl::StatusOr<StoredTrace> trace = ScanTraceDir(Location(id), id, &temp_removed);
    if (!trace.ok()) {
      LogWarning("skipping trace", {{"trace_id", id}, {"error", trace.status().ToString()}});
      continue;
    }
    if (!trace->complete && remove_incomplete) {
      bool manifest_gone = false;
      if (absl::Status st = RemoveTraceFiles(id, &manifest_gone); !st.ok()) {
        LogError("could not remove an incomplete trace",
                 {{"trace_id", id}, {"error", st.ToString()}});
      } else {
        LogWarning("removed an incomplete trace (the daemon stopped while writing or deleting it)",
                   {{"trace_id", id}, {"files", trace->files.size()}});
        ++incomplete_removed;
      }
      continue;
    }
    index_->Add(*std::move(trace));
  }
  StoreTotals totals = index_->Totals();
  LogInfo("trace store indexed", {{"root", root_},
                                  {"traces", totals.complete},
                                  {"in_progress", totals.traces - totals.complete},
                                  {"bytes", totals.bytes},
                                  {"awaiting_upload", totals.awaiting_upload},
                                  {"removed_temporary_files", temp_removed},
                                  {"removed_incomplete_traces", incomplete_removed},
                                  {"retention", DescribeRetention(retention_)},
                                  {"seconds", absl::ToDoubleSeconds(clock_->Now() - start)}});
  return absl::OkStatus();
}

std::string LocalTraceStore::Location(absl::string_view trace_id) const {
  return absl::StrCat(root_, "/", trace_id);
}

absl::Status LocalTraceStore::EnsureTraceDir(absl::string_view trace_id) {
  std::string dir = Location(trace_id);
  if (::mkdir(dir.c_str(), kDirMode) == 0) {
    index_->AddTrace(trace_id, CreatedAt(trace_id));
    return FsyncDir(root_);
  }
  if (errno != EEXIST) return ErrnoError(errno, "creating directory", dir);
  index_->AddTrace(trace_id, CreatedAt(trace_id));
  return absl::OkStatus();
}

absl::Status LocalTraceStore::PutFile(absl::string_view trace_id, absl::string_view name,
                                      absl::string_view data) {
  if (auto st = CheckIds(trace_id, name); !st.ok()) return st;
  if (layout::IsManifestName(name) || name == layout::kMetadataDir || !IsValidStoreFileName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", Excerpt(name), "\" is a manifest's name: PutManifest writes manifests"));
  }
  index_->PinForWrite(trace_id);
  absl::Cleanup unpin = [&] { index_->Unpin(trace_id); };
  if (auto st = EnsureTraceDir(trace_id); !st.ok()) return st;
  if (auto st = WriteFileAtomically(Location(trace_id), name, data, kTempPrefix, kFileMode);
      !st.ok())
    return st;
  index_->RecordFile(trace_id, CreatedAt(trace_id), name, data.size());
  return absl::OkStatus();
}

absl::Status LocalTraceStore::PutManifest(const v1::TraceManifest& manifest) {
  const std::string& trace_id = manifest.trace_id();
  if (auto st = CheckTraceId(trace_id); !st.ok()) return st;
  absl::StatusOr<std::string> json = EncodeManifest(manifest);
  if (!json.ok()) return json.status();
  absl::Status status = [&] {
    index_->PinForWrite(trace_id);
    absl::Cleanup unpin = [&] { index_->Unpin(trace_id); };
    if (auto st = EnsureTraceDir(trace_id); !st.ok()) return st;
    const std::string dir = Location(trace_id);
    const std::string meta = absl::StrCat(dir, "/", layout::kMetadataDir);
    if (::mkdir(meta.c_str(), kDirMode) == 0) {
      if (auto st = FsyncDir(dir); !st.ok()) return st;
    } else if (errno != EEXIST) {
      return ErrnoError(errno, "creating directory", meta);
    }
    const absl::string_view file =
        absl::string_view(manifest_name_).substr(layout::kMetadataDir.size() + 1);
    if (auto st = WriteFileAtomically(meta, file, *json, kTempPrefix, kFileMode); !st.ok()) {
      return st;
    }
    // A trace stored before this layout: its old manifest goes once the
    // new one is durable.
    const std::string legacy = absl::StrCat(dir, "/", layout::kLegacyManifestName);
    if (::unlink(legacy.c_str()) == 0) {
      if (auto st = FsyncDir(dir); !st.ok()) return st;
    }
    index_->RecordManifest(trace_id, CreatedAt(trace_id), manifest.job_id(), json->size());
    return absl::OkStatus();
  }();
  // Also after a failure: a full disk may get room back.
  EnforceRetention();
  return status;
}

absl::StatusOr<std::string> LocalTraceStore::FindManifest(absl::string_view trace_id) const {
  const std::string dir = Location(trace_id);
  struct stat st;
  for (const std::string& name : {manifest_name_, std::string(layout::kLegacyManifestName)}) {
    const std::string path = absl::StrCat(dir, "/", name);
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return path;
  }
  // Written under another host name (the daemon's name changed).
  std::vector<std::pair<std::string, uint64_t>> others = ScanMetadataDir(dir, nullptr);
  if (!others.empty()) return absl::StrCat(dir, "/", others.front().first);
  return NoSuchTrace(trace_id);
}

absl::StatusOr<v1::TraceManifest> LocalTraceStore::GetManifest(absl::string_view trace_id) {
  if (auto st = CheckTraceId(trace_id); !st.ok()) return st;
  absl::StatusOr<std::string> path = FindManifest(trace_id);
  if (!path.ok()) return path.status();
  auto json = ReadSmallFile(AT_FDCWD, *path, kMaxManifestBytes);
  if (!json.ok()) return absl::IsNotFound(json.status()) ? NoSuchTrace(trace_id) : json.status();
  return ParseManifest(*json, *path);
}

absl::StatusOr<v1::ListTracesResponse> LocalTraceStore::List(const v1::ListTracesRequest& request) {
  if (request.bucket()) {
    return absl::FailedPreconditionError(
        "this gpuctld has no S3 bucket (store.s3) to list; its own traces are listed without "
        "--bucket");
  }
  // The token is the id of the last trace of the previous page.
  if (absl::Status st = CheckListTracesRequest(request); !st.ok()) return st;
  const size_t page_size = static_cast<size_t>(ListPageSize(request));
  v1::ListTracesResponse response;
  std::string cursor = request.page_token();
  bool more = true;
  while (more && static_cast<size_t>(response.traces_size()) < page_size) {
    const size_t wanted = page_size - response.traces_size();
    // One more than wanted says whether another page follows.
    std::vector<std::string> ids = index_->Page(cursor, request.job_id(), wanted + 1);
    more = ids.size() > wanted;
    if (more) ids.resize(wanted);
    for (std::string& id : ids) {
      cursor = id;
      auto manifest = GetManifest(id);
      if (!manifest.ok()) {
        // Deleted meanwhile, or corrupt: the others are still listed.
        if (!absl::IsNotFound(manifest.status())) {
          LogWarning("skipping trace", {{"trace_id", id}, {"error", manifest.status().ToString()}});
        }
        continue;
      }
      if (request.trigger() != v1::TRIGGER_KIND_UNSPECIFIED &&
          TriggerKindOf(*manifest) != request.trigger()) {
        continue;
      }
      // The directory name is authoritative for paging.
      manifest->set_trace_id(std::move(id));
      *response.add_traces() = std::move(*manifest);
    }
  }
  if (more) response.set_next_page_token(cursor);
  return response;
}

absl::StatusOr<std::unique_ptr<TraceFileReader>> LocalTraceStore::Open(absl::string_view trace_id,
                                                                       absl::string_view name) {
  if (auto st = CheckIds(trace_id, name); !st.ok()) return st;
  absl::StatusOr<TracePin> pin = Pin(trace_id);
  if (!pin.ok()) return pin.status();
  std::string path = absl::StrCat(Location(trace_id), "/", name);
  if (name == manifest_name_ || name == layout::kLegacyManifestName) {
    // This store's manifest, whichever layout it was written in; another
    // host's manifest path is opened as named.
    absl::StatusOr<std::string> found = FindManifest(trace_id);
    if (!found.ok()) return found.status();
    path = *std::move(found);
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) return ErrnoError(errno, "opening", path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoError(errno, "checking", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat(path, " is not a regular file"));
  }
  return std::unique_ptr<TraceFileReader>(
      new LocalFileReader(fd.Release(), static_cast<uint64_t>(st.st_size), std::move(*pin)));
}

absl::StatusOr<TracePin> LocalTraceStore::Pin(absl::string_view trace_id) {
  if (auto st = CheckTraceId(trace_id); !st.ok()) return st;
  if (!index_->Pin(trace_id)) {
    return absl::NotFoundError(absl::StrCat("trace ", trace_id, " is being deleted"));
  }
  return MakePin(index_, trace_id);
}

absl::Status LocalTraceStore::SetAwaitingUpload(absl::string_view trace_id, bool awaiting) {
  if (auto st = CheckTraceId(trace_id); !st.ok()) return st;
  absl::Status status = [&] {
    index_->PinForWrite(trace_id);
    absl::Cleanup unpin = [&] { index_->Unpin(trace_id); };
    std::lock_guard<std::mutex> lock(mark_mu_);
    if (awaiting) {
      if (auto st = EnsureTraceDir(trace_id); !st.ok()) return st;
    } else if (!index_->Find(trace_id).has_value()) {
      return absl::NotFoundError(absl::StrCat("no trace ", trace_id));
    }
    if (auto st = SetAwaitingMark(trace_id, awaiting); !st.ok()) return st;
    index_->SetAwaitingUpload(trace_id, awaiting);
    return absl::OkStatus();
  }();
  if (status.ok() && !awaiting) EnforceRetention();
  return status;
}

absl::Status LocalTraceStore::SetAwaitingMark(absl::string_view trace_id, bool awaiting) {
  std::string dir = Location(trace_id);
  std::string path = absl::StrCat(dir, "/", kAwaitingUploadMark);
  if (awaiting) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, kFileMode));
    if (fd.get() < 0) return ErrnoError(errno, "writing", path);
  } else if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(errno, "deleting", path);
  }
  return FsyncDir(dir);
}

size_t LocalTraceStore::EnforceRetention() {
  if (IsUnlimited(retention_)) return 0;
  // One pass at a time: a call made while another runs leaves the request
  // to it, which goes round again, rather than taking a second thread.
  enforce_requested_.store(true);
  size_t evicted = 0;
  while (enforce_requested_.load() && enforce_mu_.try_lock()) {
    while (enforce_requested_.exchange(false)) evicted += EvictOnce();
    enforce_mu_.unlock();
  }
  return evicted;
}

size_t LocalTraceStore::EvictOnce() {
  const absl::Time now = clock_->Now();
  size_t evicted = 0;
  for (const Eviction& eviction : index_->TakeEvictions(retention_, now)) {
    bool manifest_gone = false;
    absl::Status st = RemoveTraceFiles(eviction.trace_id, &manifest_gone);
    if (!manifest_gone) {
      index_->AbortDelete(eviction.trace_id);
      LogError("could not evict trace", {{"trace_id", eviction.trace_id},
                                         {"reason", EvictionReasonName(eviction.reason)},
                                         {"error", st.ToString()}});
      continue;
    }
    index_->FinishDelete(eviction.trace_id);
    ++evicted;
    retention_deletions_.fetch_add(1);
    LogInfo("trace evicted",
            {{"trace_id", eviction.trace_id},
             {"reason", EvictionReasonName(eviction.reason)},
             {"bytes", eviction.bytes},
             {"age", absl::FormatDuration(absl::Trunc(now - eviction.created, absl::Seconds(1)))},
             {"retention", DescribeRetention(retention_)}});
    if (!st.ok()) {
      LogWarning("evicted trace left files behind (removed at the next start)",
                 {{"trace_id", eviction.trace_id}, {"error", st.ToString()}});
    }
  }
  return evicted;
}

absl::Status LocalTraceStore::Delete(absl::string_view trace_id) {
  if (auto st = CheckTraceId(trace_id); !st.ok()) return st;
  if (auto st = index_->TakeForDelete(trace_id); !st.ok()) return st;
  bool manifest_gone = false;
  absl::Status st = RemoveTraceFiles(trace_id, &manifest_gone);
  if (!manifest_gone) {
    index_->AbortDelete(trace_id);
    return st;
  }
  index_->FinishDelete(trace_id);
  LogInfo("trace deleted", {{"trace_id", trace_id}});
  return st;
}

absl::Status LocalTraceStore::RemoveDataFiles(absl::string_view trace_id) {
  if (auto st = CheckTraceId(trace_id); !st.ok()) return st;
  // Waits out a deletion, and keeps retention away meanwhile.
  index_->PinForWrite(trace_id);
  absl::Cleanup unpin = [&] { index_->Unpin(trace_id); };
  std::optional<StoredTrace> trace = index_->Find(trace_id);
  if (!trace.has_value()) return absl::NotFoundError(absl::StrCat("no trace ", trace_id));
  if (!trace->complete || trace->awaiting_upload) {
    return absl::FailedPreconditionError(absl::StrCat(
        "trace ", trace_id, trace->complete ? " is awaiting upload" : " is in progress",
        "; its files are its only copy"));
  }
  const std::string dir = Location(trace_id);
  absl::Status first;
  bool removed = false;
  for (const auto& [name, bytes] : trace->files) {
    if (layout::IsManifestName(name)) continue;
    std::string path = absl::StrCat(dir, "/", name);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      if (first.ok()) first = ErrnoError(errno, "deleting", path);
      continue;
    }
    index_->ForgetFile(trace_id, name);
    removed = true;
  }
  if (removed) {
    if (absl::Status st = FsyncDir(dir); !st.ok() && first.ok()) first = st;
  }
  return first;
}

absl::Status LocalTraceStore::RemoveTraceFiles(absl::string_view trace_id, bool* manifest_gone) {
  const std::string dir = Location(trace_id);
  const std::string meta = absl::StrCat(dir, "/", layout::kMetadataDir);
  *manifest_gone = false;
  std::vector<std::string> manifests = {absl::StrCat(dir, "/", layout::kLegacyManifestName)};
  for (const auto& [path, bytes] : ScanMetadataDir(dir, nullptr)) {
    manifests.push_back(absl::StrCat(dir, "/", path));
  }
  for (const std::string& manifest : manifests) {
    if (::unlink(manifest.c_str()) != 0 && errno != ENOENT && errno != ENOTDIR) {
      return ErrnoError(errno, "deleting", manifest);
    }
  }
  *manifest_gone = true;
  absl::Status first;
  auto note = [&first](absl::Status st) {
    if (first.ok()) first = std::move(st);
  };
  absl::StatusOr<std::vector<std::string>> names = ListDir(dir);
  if (!names.ok()) return absl::IsNotFound(names.status()) ? absl::OkStatus() : names.status();
  // Made durable before anything else goes: a crash from here on leaves a
  // trace without a manifest, which is never listed.
  if (manifests.size() > 1) note(FsyncDir(meta));
  note(FsyncDir(dir));
  for (const std::string& name : *names) {
    std::string path = absl::StrCat(dir, "/", name);
    if (name == layout::kMetadataDir) {
      absl::StatusOr<std::vector<std::string>> rest = ListDir(path);
      for (const std::string& left : rest.ok() ? *rest : std::vector<std::string>()) {
        std::string file = absl::StrCat(path, "/", left);
        if (::unlink(file.c_str()) != 0 && errno != ENOENT)
          note(ErrnoError(errno, "deleting", file));
      }
      if (::rmdir(path.c_str()) != 0 && errno != ENOENT) {
        note(ErrnoError(errno, "deleting directory", path));
      }
      continue;
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) note(ErrnoError(errno, "deleting", path));
  }
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) {
    note(ErrnoError(errno, "deleting directory", dir));
  }
  note(FsyncDir(root_));
  return first;
}

std::optional<StoredTrace> LocalTraceStore::Find(absl::string_view trace_id) const {
  return index_->Find(trace_id);
}

StoreTotals LocalTraceStore::Totals() const { return index_->Totals(); }

std::vector<std::string> LocalTraceStore::AwaitingUpload() const {
  return index_->AwaitingUpload();
}

}  // namespace gpuctl::daemon
