#ifndef GPUCTL_DAEMON_HOSTCTX_SYMBOLIZER_H_
#define GPUCTL_DAEMON_HOSTCTX_SYMBOLIZER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/common/posix_file.h"
#include "daemon/hostctx/perf_record.h"
#include "daemon/hostctx/process_image.h"

namespace gpuctl::hostctx {

// One frame of a call chain, as far as it could be named.
struct Frame {
  std::string function;  // empty when no symbol covers the address
  std::string module;    // the mapped file's path in the process, "[vdso]" or "[jit]"
  uint64_t offset = 0;   // from the module's start (or the function's, when named)
};

// "function", else "module+0xoffset", else "0xaddress".
std::string FrameLabel(const Frame& frame, uint64_t address);

// Names addresses of a process. The interface the trace conversion uses, so
// tests can give it names of their own.
class FrameSymbolizer {
 public:
  virtual ~FrameSymbolizer() = default;
  // Which address space `pid` had at `time_ns` (a sample's time): they
  // are numbered from 0, the next one starting at each exec the capture
  // saw. 0 for a symbolizer that knows one per process.
  virtual uint32_t AddressSpaceAt(pid_t pid, uint64_t time_ns) { return 0; }
  // `address` of address space `space` of `pid` (AddressSpaceAt) is a
  // sampled instruction pointer (the innermost frame) or a return address
  // (the callers: the call itself sits just before it).
  virtual Frame Symbolize(pid_t pid, uint32_t space, uint64_t address, bool is_return_address) = 0;
  // A sample's call chain unwound with DWARF call-frame information from
  // its user registers and stack copy (SamplerOptions::dwarf_unwind): the
  // instruction pointer, then return addresses, innermost first. Empty
  // when the sample has no stack copy or cannot be unwound at all.
  virtual std::vector<uint64_t> Unwind(const CpuSample& sample) { return {}; }
};

// The call chain to show for `sample`: SpliceCallChains of the
// DWARF-unwound chain (when it has a stack copy) and the frame-pointer
// chain the kernel walked.
std::vector<uint64_t> BestCallChain(const CpuSample& sample, FrameSymbolizer* symbolizer);

// One chain of a DWARF-unwound chain (right from the top, but cut where the
// stack copy ends) and a frame-pointer one (deep, but it skips the caller of
// a function without a frame, such as libc's system-call wrappers): the
// unwound frames down to the deepest one the walked chain also holds, then
// the walked chain's frames below it, when that is at least as deep as
// either; else the deeper of the two.
std::vector<uint64_t> SpliceCallChains(const std::vector<uint64_t>& unwound,
                                       const std::vector<uint64_t>& walked);

// Symbolizes native frames with elfutils' libdwfl from the files the process
// maps, opened inside its own root (<proc_root>/<pid>/root, so a
// container's files are the container's, and its symlinks cannot lead out),
// and JIT frames from its perf map (/tmp/perf-<pid>.map in that root, the pid
// as the process's own namespace knows it). Results are cached per address
// space.
//
// A process's mappings come from its ProcessImage when the capture
// recorded one (HostCapture::images): its maps when first sampled, then
// the executable mappings and execs its threads made, with its root held
// open, so a process that exited or exec'd during the window is named as
// it was at each sample's time. A process without one is read from
// <proc_root> at its first lookup (or LoadProcess): load it while it runs.
// The [vdso] is named from the daemon's own (the same kernel's) image when
// the sizes agree; else its frames read "[vdso]+0x...".
//
// Thread: not thread-safe.
class Symbolizer final : public FrameSymbolizer {
 public:
  explicit Symbolizer(std::string proc_root = "/proc",
                      absl::flat_hash_map<pid_t, ProcessImage> images = {});
  ~Symbolizer() override;
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Reads the process's maps and perf map now (or takes its image). False
  // when neither could be read (the process is gone, or its maps are not
  // readable to the daemon).
  bool LoadProcess(pid_t pid);

  uint32_t AddressSpaceAt(pid_t pid, uint64_t time_ns) override;
  Frame Symbolize(pid_t pid, uint32_t space, uint64_t address, bool is_return_address) override;
  // In the process's first address space (the only one of a process read
  // from /proc).
  Frame Symbolize(pid_t pid, uint64_t address, bool is_return_address) {
    return Symbolize(pid, 0, address, is_return_address);
  }
  // With elfutils' unwinder (dwfl_getthread_frames) over the modules of the
  // process's address space at the sample's time: memory reads are answered from the sample's stack
  // copy only (nothing is read from the live process), so a frame whose
  // caller's state lies beyond the copy ends the chain. At most
  // kMaxCallchainDepth frames.
  std::vector<uint64_t> Unwind(const CpuSample& sample) override;

  // Forgets a process (it exited).
  void DropProcess(pid_t pid);

 private:
  struct Space;
  class Process;
  Process* ProcessFor(pid_t pid);

  const std::string proc_root_;
  absl::flat_hash_map<pid_t, ProcessImage> images_;  // those not made Processes yet
  std::vector<std::shared_ptr<const UniqueFd>> live_roots_;
  std::vector<char> vdso_;  // before processes_: their modules read it
  absl::flat_hash_map<pid_t, std::unique_ptr<Process>> processes_;
};

}  // namespace gpuctl::hostctx

#endif  // GPUCTL_DAEMON_HOSTCTX_SYMBOLIZER_H_
