#include "daemon/hostctx/mapped_files.h"

#include <fcntl.h>
#include <gelf.h>
#include <linux/openat2.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <map>
#include <utility>

#include "daemon/common/posix_file.h"

namespace gpuctl::hostctx {

int OpenInRoot(int root_fd, const std::string& path) {
  open_how how{};
  how.flags = O_RDONLY | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const int fd = static_cast<int>(syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof(how)));
  if (fd >= 0 || errno != ENOSYS) return fd;
  // Kernels before 5.6: relative to the root, symlinks unconfined.
  return openat(root_fd, path.c_str() + path.find_first_not_of('/'), O_RDONLY | O_CLOEXEC);
}

std::string ReadFdUpTo(int fd, size_t max_bytes) {
  std::string out;
  char buffer[64 << 10];
  while (out.size() < max_bytes) {
    const ssize_t n = read(fd, buffer, std::min(sizeof(buffer), max_bytes - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

std::vector<Mapping> LiveMappings(std::vector<Mapping> made) {
  std::map<uint64_t, uint64_t> taken;  // start -> end of those kept
  std::vector<Mapping> kept;
  for (auto it = made.rbegin(); it != made.rend(); ++it) {
    auto after = taken.lower_bound(it->end);
    if (after != taken.begin() && std::prev(after)->second > it->start) continue;
    taken.emplace(it->start, it->end);
    kept.push_back(std::move(*it));
  }
  std::sort(kept.begin(), kept.end(),
            [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
  return kept;
}

bool SameFile(const Mapping& a, const Mapping& b) {
  return a.inode == b.inode && a.dev_major == b.dev_major && a.dev_minor == b.dev_minor &&
         a.path == b.path;
}

std::optional<uint64_t> ModuleLowAddress(int root_fd, const Mapping& first) {
  if (first.pgoff == 0) return first.start;
  if (root_fd < 0) return std::nullopt;
  UniqueFd fd(OpenInRoot(root_fd, first.path));
  if (fd.get() < 0) return std::nullopt;
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr);
  if (elf == nullptr) return std::nullopt;
  const uint64_t page_mask = ~(static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) - 1);
  std::optional<uint64_t> first_page;
  std::optional<uint64_t> bias;
  size_t count = 0;
  if (elf_getphdrnum(elf, &count) != 0) count = 0;
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(elf, static_cast<int>(i), &phdr) == nullptr || phdr.p_type != PT_LOAD) {
      continue;
    }
    if (!first_page) first_page = phdr.p_vaddr & page_mask;
    if (!bias && (phdr.p_offset & page_mask) <= first.pgoff &&
        first.pgoff < phdr.p_offset + phdr.p_filesz) {
      // The segment mapped there: its p_vaddr and p_offset agree modulo
      // the page size.
      bias = first.start - first.pgoff - (phdr.p_vaddr - phdr.p_offset);
    }
  }
  elf_end(elf);
  if (!first_page || !bias) return std::nullopt;
  return *bias + *first_page;
}

std::vector<char> ReadOwnVdso() {
  const uintptr_t base = getauxval(AT_SYSINFO_EHDR);
  if (base == 0) return {};
  std::string maps;
  {
    UniqueFd fd(open("/proc/self/maps", O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return {};
    maps = ReadFdUpTo(fd.get(), 1 << 20);
  }
  for (const Mapping& mapping : ParseMaps(maps)) {
    if (mapping.path != kVdsoName || mapping.start != base) continue;
    const auto* begin = reinterpret_cast<const char*>(base);  // NOLINT: the mapped image
    return std::vector<char>(begin, begin + (mapping.end - mapping.start));
  }
  return {};
}

}  // namespace gpuctl::hostctx
