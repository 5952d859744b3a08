#ifndef GPUCTL_DAEMON_HOSTCTX_PROCESS_IMAGE_H_
#define GPUCTL_DAEMON_HOSTCTX_PROCESS_IMAGE_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "daemon/common/posix_file.h"

namespace gpuctl::hostctx {

// A mapping of a file (or of the [vdso]) in a process: a line of its maps,
// or an MmapRecord.
struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t pgoff = 0;  // the file offset mapped at `start`
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  uint64_t inode = 0;
  std::string path;  // absolute in the process's root, or "[vdso]"
};

// The mappings of /proc/<pid>/maps text that can name frames: those of
// the files (an absolute path) mapped executable somewhere, and the
// [vdso]; data files, heap, stacks and anonymous memory are left out, as
// are lines that do not parse.
std::vector<Mapping> ParseMaps(absl::string_view text);

// One change of a process's address space as a capture saw it.
struct AddressSpaceChange {
  uint64_t time_ns = 0;  // the capture's clock (CLOCK_REALTIME)
  // An exec: the mappings until then are gone (the new program's follow
  // as changes of their own, MmapRecords). Else `mappings` were mapped at
  // time_ns: the process's maps when it was first sampled, or one new
  // mapping; each replaces what it overlaps.
  bool exec = false;
  std::vector<Mapping> mappings;
};

// What a capture keeps of a sampled process so that its frames can be
// named after the window, when the process may have exited or exec'd:
// its root directory, held open from when it was first seen (an O_PATH
// descriptor stays valid after the process exits, so its files are still
// opened inside its container), and its address space over time.
struct ProcessImage {
  // The pid in the process's own pid namespace, which names its perf map.
  pid_t namespace_pid = 0;
  // When it started (StartTicksOf): tells it from a later process that
  // reuses its pid. 0 when unknown.
  uint64_t start_ticks = 0;
  // O_PATH of <proc_root>/<pid>/root; shared by the processes of one
  // capture whose roots are the same directory. Null when unreadable.
  std::shared_ptr<const UniqueFd> root;
  // In the order recorded (rings are drained one thread at a time): sort
  // by time_ns before replaying.
  std::vector<AddressSpaceChange> changes;
};

// The process's image now: its root opened (or `shared_roots`' entry for
// the same directory, to which a new one is added), its namespace pid and
// a snapshot of its maps taken at `time_ns`, at most `max_mappings` of
// them. An image without changes when the process is gone.
ProcessImage SnapshotProcess(const std::string& proc_root, pid_t pid, uint64_t time_ns,
                             size_t max_mappings,
                             std::vector<std::shared_ptr<const UniqueFd>>* shared_roots);

// The start time of `pid` in clock ticks since boot (the 22nd field of
// <proc_root>/<pid>/stat); 0 when unreadable.
uint64_t StartTicksOf(const std::string& proc_root, pid_t pid);

// The last NSpid field of <proc_root>/<pid>/status; `pid` when unreadable.
pid_t NamespacePid(const std::string& proc_root, pid_t pid);

}  // namespace gpuctl::hostctx

#endif  // GPUCTL_DAEMON_HOSTCTX_PROCESS_IMAGE_H_
