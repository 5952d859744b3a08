#include "daemon/kineto/kineto_pickup.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/common/posix_file.h"
#include "daemon/kineto/kineto_procfs.h"

namespace gpuctl::daemon::kineto {
namespace {

using Outcome = PickupResult::Outcome;

PickupResult With(Outcome outcome, std::string message) {
  PickupResult result;
  result.outcome = outcome;
  result.message = std::move(message);
  return result;
}

int OpenInRoot(int root, const std::string& path, uint64_t flags) {
  open_how how = {};
  how.flags = flags | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(syscall(SYS_openat2, root, path.c_str(), &how, sizeof(how)));
}

bool ReadAll(int fd, uint64_t size, std::string* out) {
  out->resize(size);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = read(fd, out->data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  char extra;
  return read(fd, &extra, 1) == 0;  // it did not grow meanwhile
}

// The process's /proc directory, if it still belongs to the same process.
::gpuctl::UniqueFd OpenProcess(const PickupRequest& request) {
  ::gpuctl::UniqueFd dir(open(absl::StrCat(request.proc_root, "/", request.host_pid).c_str(),
                              O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return dir;
  ::gpuctl::UniqueFd stat_fd(openat(dir.get(), "stat", O_RDONLY | O_CLOEXEC));
  char buf[1024];
  const ssize_t n = stat_fd.get() < 0 ? -1 : read(stat_fd.get(), buf, sizeof(buf) - 1);
  std::optional<uint64_t> start =
      n > 0 ? ParseStatStartTime(std::string(buf, static_cast<size_t>(n))) : std::nullopt;
  if (!start.has_value() || *start != request.start_time) return ::gpuctl::UniqueFd();
  return dir;
}

void RemoveOriginal(int root, const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  ::gpuctl::UniqueFd parent(OpenInRoot(root, dir, O_PATH | O_DIRECTORY));
  if (parent.get() >= 0) unlinkat(parent.get(), path.substr(slash + 1).c_str(), 0);
}

}  // namespace

PickupResult PickUpKinetoTrace(const PickupRequest& request) {
  if (request.path.empty() || request.path.front() != '/') {
    return With(Outcome::kFailed, "the trace file path is not absolute");
  }
  ::gpuctl::UniqueFd proc = OpenProcess(request);
  if (proc.get() < 0) return With(Outcome::kGone, "the process is gone");
  ::gpuctl::UniqueFd root(openat(proc.get(), "root", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) {
    return With(Outcome::kFailed,
                absl::StrCat("cannot open the process's root (/proc/", request.host_pid,
                             "/root): ", std::strerror(errno),
                             "; gpuctld needs ptrace-read access to it (CAP_SYS_PTRACE)"));
  }
  ::gpuctl::UniqueFd file(OpenInRoot(root.get(), request.path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK));
  if (file.get() < 0) {
    if (errno == ENOENT) return With(Outcome::kNotYet, "");
    if (errno == ENOSYS) return With(Outcome::kFailed, "this kernel has no openat2 (Linux 5.6+)");
    return With(Outcome::kRefused, absl::StrCat("cannot open ", request.path,
                                                " in the process: ", std::strerror(errno)));
  }
  struct stat st = {};
  if (fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return With(Outcome::kRefused, absl::StrCat(request.path, " is not a regular file"));
  }
  if (st.st_uid != request.uid) {
    return With(Outcome::kRefused, absl::StrCat(request.path, " belongs to uid ", st.st_uid,
                                                ", not the process's uid ", request.uid));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (request.discard) {
    file.Reset();
    RemoveOriginal(root.get(), request.path);
    PickupResult result = With(Outcome::kDone, "");
    result.source_bytes = size;
    return result;
  }
  if (size > request.max_bytes) {
    RemoveOriginal(root.get(), request.path);
    PickupResult result = With(
        Outcome::kRefused, absl::StrCat("the kineto trace is ", size, " bytes, over the cap of ",
                                        request.max_bytes, " bytes (kineto.max_trace_bytes)"));
    result.source_bytes = size;
    return result;
  }
  std::string json;
  if (!ReadAll(file.get(), size, &json)) {
    return With(Outcome::kFailed, absl::StrCat("could not read ", request.path, " whole"));
  }
  file.Reset();
  absl::StatusOr<KinetoConverted> converted =
      ConvertKinetoTrace(json, request.tag, request.gzip_level);
  RemoveOriginal(root.get(), request.path);
  PickupResult result;
  result.source_bytes = size;
  if (!converted.ok()) {
    result.outcome = Outcome::kRefused;
    result.message = absl::StrCat("invalid kineto trace: ", converted.status().message());
    return result;
  }
  result.outcome = Outcome::kDone;
  result.converted = *std::move(converted);
  return result;
}

}  // namespace gpuctl::daemon::kineto
