#ifndef GPUCTL_DAEMON_HOSTCTX_MAPPED_FILES_H_
#define GPUCTL_DAEMON_HOSTCTX_MAPPED_FILES_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/hostctx/process_image.h"

namespace gpuctl::hostctx {

// What the Symbolizer reads of a process's mapped files and of its
// mappings, apart from libdwfl.

inline constexpr char kVdsoName[] = "[vdso]";

// Opens `path` (absolute inside the process) beneath `root_fd` as if
// `root_fd` were "/": symlinks in a container resolve inside it. An fd, or
// -1 with errno.
int OpenInRoot(int root_fd, const std::string& path);

// Reads `fd` to its end, at most `max_bytes`.
std::string ReadFdUpTo(int fd, size_t max_bytes);

// Of mappings in the order they were made, those no later one overlaps
// (an mmap replaces what it overlaps), sorted by address.
std::vector<Mapping> LiveMappings(std::vector<Mapping> made);

// The same file: path, device and inode.
bool SameFile(const Mapping& a, const Mapping& b);

// Where the file's first loadable page is mapped (the start of the first
// line of the file in /proc/<pid>/maps, as libdwfl expects a module's low
// address), from `first`, its lowest mapping: that mapping's start when it
// maps offset 0, else found through the ELF's program headers (an
// executable mapping recorded alone, the file's read-only first segment
// not being recorded). Unknown (nullopt) when the file cannot be read.
std::optional<uint64_t> ModuleLowAddress(int root_fd, const Mapping& first);

// The daemon's own vDSO image: the same as every 64-bit process's on this
// kernel (as perf also assumes), so that a process's [vdso] frames are
// named after it exits. Empty when not found.
std::vector<char> ReadOwnVdso();

}  // namespace gpuctl::hostctx

#endif  // GPUCTL_DAEMON_HOSTCTX_MAPPED_FILES_H_
