#include "daemon/common/posix_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpuctl {

absl::Status ErrnoError(int err, absl::string_view what, absl::string_view path) {
  absl::StatusCode code = absl::StatusCode::kInternal;
  absl::string_view phrase;
  switch (err) {
    case ENOSPC:
      code = absl::StatusCode::kResourceExhausted;
      phrase = "no space left on device";
      break;
    case EDQUOT:
      code = absl::StatusCode::kResourceExhausted;
      phrase = "disk quota exceeded";
      break;
    case EFBIG:
      code = absl::StatusCode::kResourceExhausted;
      phrase = "file size limit exceeded";
      break;
    case EACCES:
    case EPERM:
      code = absl::StatusCode::kPermissionDenied;
      phrase = "permission denied";
      break;
    case EROFS:
      code = absl::StatusCode::kPermissionDenied;
      phrase = "read-only file system";
      break;
    case ENOENT:
      code = absl::StatusCode::kNotFound;
      break;
    default:
      break;
  }
  if (!phrase.empty()) return absl::Status(code, absl::StrCat(phrase, " ", what, " ", path));
  return absl::Status(code, absl::StrCat(what, " ", path, ": ", std::strerror(err)));
}

void UniqueFd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string ParentDir(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

absl::Status FsyncDir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError(errno, "opening directory", dir);
  if (::fsync(fd.get()) != 0) return ErrnoError(errno, "syncing directory", dir);
  return absl::OkStatus();
}

absl::Status MakeDirs(const std::string& path, mode_t mode) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    std::string partial = path.substr(0, i);
    if (::mkdir(partial.c_str(), mode) == 0) {
      if (auto st = FsyncDir(ParentDir(partial)); !st.ok()) return st;
    } else if (errno != EEXIST) {
      return ErrnoError(errno, "creating directory", partial);
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(errno, "checking", path);
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a directory"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ErrnoError(errno, "listing", dir);
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      names.emplace_back(e->d_name);
    }
  }
  ::closedir(d);
  return names;
}

absl::StatusOr<std::unique_ptr<AtomicFile>> AtomicFile::Create(std::string final_path,
                                                               std::string temp_template,
                                                               mode_t mode) {
  UniqueFd fd(::mkostemp(temp_template.data(), O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError(errno, "writing", final_path);
  return std::unique_ptr<AtomicFile>(
      new AtomicFile(std::move(final_path), std::move(temp_template), std::move(fd), mode));
}

AtomicFile::AtomicFile(std::string final_path, std::string temp_path, UniqueFd fd, mode_t mode)
    : final_path_(std::move(final_path)),
      temp_path_(std::move(temp_path)),
      fd_(std::move(fd)),
      mode_(mode) {}

AtomicFile::~AtomicFile() { Abandon(); }

void AtomicFile::Abandon() {
  fd_.Reset();
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
}

absl::Status AtomicFile::Append(absl::string_view data) {
  if (fd_.get() < 0) return absl::FailedPreconditionError("append to a closed file");
  while (!data.empty()) {
    ssize_t n = ::write(fd_.get(), data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, "writing", final_path_);
    data.remove_prefix(static_cast<size_t>(n));
    written_ += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

absl::Status AtomicFile::Commit() {
  absl::Status status;
  if (fd_.get() < 0) status = absl::FailedPreconditionError("commit of a closed file");
  if (status.ok() && ::fchmod(fd_.get(), mode_) != 0)
    status = ErrnoError(errno, "writing", final_path_);
  if (status.ok() && ::fsync(fd_.get()) != 0) status = ErrnoError(errno, "writing", final_path_);
  if (status.ok() && ::close(fd_.Release()) != 0)
    status = ErrnoError(errno, "writing", final_path_);
  if (status.ok() && ::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    status = ErrnoError(errno, "writing", final_path_);
  }
  if (!status.ok()) {
    Abandon();
    return status;
  }
  temp_path_.clear();
  return FsyncDir(ParentDir(final_path_));
}

absl::Status WriteFileAtomically(const std::string& dir, absl::string_view name,
                                 absl::string_view data, absl::string_view temp_prefix,
                                 mode_t mode) {
  absl::StatusOr<std::unique_ptr<AtomicFile>> file = AtomicFile::Create(
      absl::StrCat(dir, "/", name), absl::StrCat(dir, "/", temp_prefix, "XXXXXX"), mode);
  if (!file.ok()) return file.status();
  if (absl::Status st = (*file)->Append(data); !st.ok()) return st;
  return (*file)->Commit();
}

}  // namespace gpuctl
