#ifndef GPUCTL_DAEMON_KINETO_KINETO_PICKUP_H_
#define GPUCTL_DAEMON_KINETO_KINETO_PICKUP_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "daemon/convert/kineto_trace.h"

namespace gpuctl::daemon::kineto {

// One trace file to fetch from a kineto process.
struct PickupRequest {
  std::string proc_root = "/proc";
  int32_t host_pid = 0;
  // ProcIdentity::start_time: the file is read only from this process.
  uint64_t start_time = 0;
  uid_t uid = 0;  // the file must be this uid's
  // Absolute, as the process sees it (its mount namespace, its root).
  std::string path;
  // Larger files are refused, never read in part.
  uint64_t max_bytes = 0;
  KinetoTraceTag tag;
  int gzip_level = 6;
  // The trace was cancelled: a file that appears is checked like any other
  // (regular, the process's uid) and unlinked unread; kDone says it was.
  bool discard = false;
};

struct PickupResult {
  enum class Outcome {
    kNotYet,   // no file yet (kineto writes <file>.tmp, then renames it)
    kDone,     // `converted` holds the stored file; the original is gone
    kRefused,  // the file is not acceptable; `message` says why
    kFailed,   // the daemon could not read it; `message` says why
    kGone,     // the process is gone (or its pid belongs to another now)
  };
  Outcome outcome = Outcome::kNotYet;
  std::string message;
  KinetoConverted converted;
  uint64_t source_bytes = 0;
};

// Fetches the file through the process's own root: /proc/<pid> is opened
// once and its start time checked (so a reused pid is never read), then
// `path` is resolved by openat2 inside /proc/<pid>/root with
// RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS, so the
// process cannot steer the daemon outside its own filesystem. The file
// must be a regular file owned by `uid` and at most max_bytes; it is then
// converted (ConvertKinetoTrace) and unlinked through its parent
// directory. An oversized or invalid file is unlinked too (it was written
// for this request). With `discard`, it is unlinked without being read.
// Blocking: runs on a worker.
PickupResult PickUpKinetoTrace(const PickupRequest& request);

}  // namespace gpuctl::daemon::kineto

#endif  // GPUCTL_DAEMON_KINETO_KINETO_PICKUP_H_
