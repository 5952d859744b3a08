#include "daemon/core/local_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/common/trace_id.h"
#include "google/protobuf/util/json_util.h"

namespace gpuctl::daemon {
namespace {

constexpr absl::string_view kTempPrefix = ".tmp-";
constexpr mode_t kDirMode = 0750;
constexpr mode_t kFileMode = 0640;
constexpr int32_t kDefaultPageSize = 100;
constexpr int32_t kMaxPageSize = 1000;
constexpr size_t kMaxManifestBytes = 16 << 20;

absl::Status ErrnoError(int err, absl::string_view what, absl::string_view path) {
  std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

// Closes the descriptor on every path out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

absl::Status MakeDirs(const std::string& path) {
  std::string partial;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || (path[i] == '/' && i > 0)) {
      partial = path.substr(0, i);
      if (::mkdir(partial.c_str(), kDirMode) != 0 && errno != EEXIST) {
        return ErrnoError(errno, "creating directory", partial);
      }
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(errno, "checking", path);
  if (!S_ISDIR(st.st_mode))
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a directory"));
  return absl::OkStatus();
}

absl::Status FsyncDir(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError(errno, "opening directory", dir);
  if (::fsync(fd.get()) != 0) return ErrnoError(errno, "syncing directory", dir);
  return absl::OkStatus();
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (struct dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  return names;
}

absl::Status CheckIds(absl::string_view trace_id, absl::string_view name) {
  if (!IsValidTraceId(trace_id)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid trace id \"", trace_id, "\""));
  }
  if (!IsValidStoreFileName(name)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid file name \"", name, "\""));
  }
  return absl::OkStatus();
}

class LocalFileReader final : public TraceFileReader {
 public:
  LocalFileReader(int fd, uint64_t size) : fd_(fd), size_(size) {}
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
  Fd fd_;
  uint64_t size_;
  uint64_t offset_ = 0;
};

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
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

}  // namespace

bool IsValidStoreFileName(absl::string_view name) {
  if (name.empty() || name.size() > 255 || name.front() == '.') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<LocalTraceStore>> LocalTraceStore::Create(const std::string& root) {
  if (root.empty()) return absl::InvalidArgumentError("trace store root is empty");
  std::string clean = root;
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  if (auto st = MakeDirs(clean); !st.ok()) return st;
  size_t removed = 0;
  for (const std::string& id : ListDir(clean)) {
    if (!IsValidTraceId(id)) continue;
    std::string dir = absl::StrCat(clean, "/", id);
    for (const std::string& name : ListDir(dir)) {
      if (absl::StartsWith(name, kTempPrefix) && ::unlink((dir + "/" + name).c_str()) == 0) {
        ++removed;
      }
    }
  }
  if (removed > 0) LogInfo("removed stale temporary files", {{"root", clean}, {"count", removed}});
  return std::unique_ptr<LocalTraceStore>(new LocalTraceStore(clean));
}

std::string LocalTraceStore::Location(absl::string_view trace_id) const {
  return absl::StrCat(root_, "/", trace_id);
}

absl::Status LocalTraceStore::WriteAtomically(const std::string& dir, absl::string_view name,
                                              absl::string_view data) {
  if (::mkdir(dir.c_str(), kDirMode) != 0 && errno != EEXIST) {
    return ErrnoError(errno, "creating directory", dir);
  }
  std::string temp = absl::StrCat(dir, "/", kTempPrefix, ::getpid(), "-", temp_counter_++);
  std::string final_path = absl::StrCat(dir, "/", name);
  Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, kFileMode));
  if (fd.get() < 0) return ErrnoError(errno, "creating", temp);
  absl::Status status;
  size_t done = 0;
  while (status.ok() && done < data.size()) {
    ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      status = ErrnoError(errno, "writing", temp);
    else
      done += static_cast<size_t>(n);
  }
  if (status.ok() && ::fsync(fd.get()) != 0) status = ErrnoError(errno, "syncing", temp);
  if (status.ok() && ::close(fd.release()) != 0) status = ErrnoError(errno, "closing", temp);
  if (status.ok() && ::rename(temp.c_str(), final_path.c_str()) != 0) {
    status = ErrnoError(errno, "renaming into", final_path);
  }
  if (!status.ok()) {
    ::unlink(temp.c_str());
    return status;
  }
  return FsyncDir(dir);
}

absl::Status LocalTraceStore::PutFile(absl::string_view trace_id, absl::string_view name,
                                      absl::string_view data) {
  if (auto st = CheckIds(trace_id, name); !st.ok()) return st;
  return WriteAtomically(Location(trace_id), name, data);
}

absl::Status LocalTraceStore::PutManifest(const v1::TraceManifest& manifest) {
  if (auto st = CheckIds(manifest.trace_id(), kManifestFileName); !st.ok()) return st;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  std::string json;
  auto st = google::protobuf::util::MessageToJsonString(manifest, &json, options);
  if (!st.ok()) return absl::InternalError(absl::StrCat("encoding manifest: ", st.ToString()));
  return WriteAtomically(Location(manifest.trace_id()), kManifestFileName, json);
}

absl::StatusOr<v1::TraceManifest> LocalTraceStore::GetManifest(absl::string_view trace_id) {
  if (auto st = CheckIds(trace_id, kManifestFileName); !st.ok()) return st;
  std::string path = absl::StrCat(Location(trace_id), "/", kManifestFileName);
  auto json = ReadSmallFile(path, kMaxManifestBytes);
  if (!json.ok()) return json.status();
  v1::TraceManifest manifest;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  auto st = google::protobuf::util::JsonStringToMessage(*json, &manifest, options);
  if (!st.ok()) {
    return absl::DataLossError(absl::StrCat("corrupt manifest ", path, ": ", st.ToString()));
  }
  return manifest;
}

absl::StatusOr<v1::ListTracesResponse> LocalTraceStore::List(const v1::ListTracesRequest& request) {
  if (request.page_size() < 0 || request.page_size() > kMaxPageSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size ", request.page_size(), " is outside [0, ", kMaxPageSize, "]"));
  }
  if (!request.page_token().empty() && !IsValidTraceId(request.page_token())) {
    return absl::InvalidArgumentError("invalid page token");
  }
  const size_t page_size = request.page_size() == 0 ? kDefaultPageSize : request.page_size();
  std::vector<std::string> ids;
  for (std::string& name : ListDir(root_)) {
    if (IsValidTraceId(name) && (request.page_token().empty() || name < request.page_token())) {
      ids.push_back(std::move(name));
    }
  }
  std::sort(ids.begin(), ids.end(), std::greater<>());
  v1::ListTracesResponse response;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (static_cast<size_t>(response.traces_size()) == page_size) {
      response.set_next_page_token(response.traces(response.traces_size() - 1).trace_id());
      break;
    }
    auto manifest = GetManifest(ids[i]);
    if (!manifest.ok()) {
      // A trace still in progress has no manifest yet; a corrupt one must
      // not hide the others.
      if (!absl::IsNotFound(manifest.status())) {
        LogWarning("skipping trace",
                   {{"trace_id", ids[i]}, {"error", manifest.status().ToString()}});
      }
      continue;
    }
    if (!request.job_id().empty() && manifest->job_id() != request.job_id()) continue;
    // The directory name is authoritative for paging.
    manifest->set_trace_id(ids[i]);
    *response.add_traces() = std::move(*manifest);
  }
  return response;
}

absl::StatusOr<std::unique_ptr<TraceFileReader>> LocalTraceStore::Open(absl::string_view trace_id,
                                                                       absl::string_view name) {
  if (auto st = CheckIds(trace_id, name); !st.ok()) return st;
  std::string path = absl::StrCat(Location(trace_id), "/", name);
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) return ErrnoError(errno, "opening", path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoError(errno, "checking", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat(path, " is not a regular file"));
  }
  return std::unique_ptr<TraceFileReader>(
      new LocalFileReader(fd.release(), static_cast<uint64_t>(st.st_size)));
}

}  // namespace gpuctl::daemon
