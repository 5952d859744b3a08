#ifndef GPUCTL_DAEMON_COMMON_POSIX_FILE_H_
#define GPUCTL_DAEMON_COMMON_POSIX_FILE_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuctl {

// A failed system call as a status a user can act on: "no space left on
// device writing /x/y" (RESOURCE_EXHAUSTED) for a full disk or quota,
// "permission denied ..." and "read-only file system ..."
// (PERMISSION_DENIED), NOT_FOUND for ENOENT, else "<what> <path>:
// <strerror>" (INTERNAL).
absl::Status ErrnoError(int err, absl::string_view what, absl::string_view path);

// Owns a file descriptor; closes it on every path out.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = other.Release();
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  int Release() { return std::exchange(fd_, -1); }
  void Reset();

 private:
  int fd_ = -1;
};

// "/a/b" for "/a/b/c", "/" for "/c", "." for "c".
std::string ParentDir(const std::string& path);
absl::Status FsyncDir(const std::string& dir);
// Creates `path` and its missing parents with `mode`, each made durable in
// its parent; FAILED_PRECONDITION when `path` exists and is no directory.
absl::Status MakeDirs(const std::string& path, mode_t mode);
// The entries of `dir` but "." and "..".
absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir);

// A file that appears under its final name whole or not at all: written to
// a temporary in the same directory, then fsync'ed, renamed over the final
// name and the directory fsync'ed by Commit. Destroyed without a Commit
// (or after a failed one) it removes the temporary. Errors name the final
// path. Not thread-safe.
class AtomicFile {
 public:
  // `temp_template` is the temporary's path ending in "XXXXXX" (mkostemp),
  // in the final file's directory. The file gets `mode` at Commit.
  static absl::StatusOr<std::unique_ptr<AtomicFile>> Create(std::string final_path,
                                                            std::string temp_template, mode_t mode);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  absl::Status Append(absl::string_view data);
  absl::Status Commit();
  uint64_t written() const { return written_; }
  const std::string& final_path() const { return final_path_; }

 private:
  AtomicFile(std::string final_path, std::string temp_path, UniqueFd fd, mode_t mode);
  void Abandon();

  std::string final_path_;
  std::string temp_path_;  // empty once renamed or removed
  UniqueFd fd_;
  mode_t mode_;
  uint64_t written_ = 0;
};

// One-shot form: `data` as `dir`/`name`, its temporary named
// "<dir>/<temp_prefix>XXXXXX".
absl::Status WriteFileAtomically(const std::string& dir, absl::string_view name,
                                 absl::string_view data, absl::string_view temp_prefix,
                                 mode_t mode);

}  // namespace gpuctl

#endif  // GPUCTL_DAEMON_COMMON_POSIX_FILE_H_
