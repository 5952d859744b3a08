#ifndef GPUCTL_DAEMON_HOSTCTX_PROC_TASKS_H_
#define GPUCTL_DAEMON_HOSTCTX_PROC_TASKS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace gpuctl::hostctx {

// What the sampler reads of /proc, rooted at `proc_root` (the daemon's
// /proc, or a directory a test lays out). Processes and threads come and go
// while this runs: one that is gone is simply left out.

// The processes `pids` and every descendant of theirs alive now (from the
// ppid field of each <proc_root>/<n>/stat), each once, the given ones
// first; a descendant in `excluded` is left out with its own descendants.
std::vector<pid_t> ProcessesWithDescendants(const std::string& proc_root,
                                            const std::vector<pid_t>& pids,
                                            const std::vector<pid_t>& excluded = {});

// The threads of `pid` (<proc_root>/<pid>/task); empty when it is gone.
std::vector<pid_t> ThreadsOf(const std::string& proc_root, pid_t pid);

// The parent of `pid` from <proc_root>/<pid>/stat, or -1 when unreadable.
pid_t ParentOf(const std::string& proc_root, pid_t pid);

// Reads at most `max_bytes` of a file; empty when it cannot be opened.
std::string ReadSmallFile(const std::string& path, size_t max_bytes);

}  // namespace gpuctl::hostctx

#endif  // GPUCTL_DAEMON_HOSTCTX_PROC_TASKS_H_
