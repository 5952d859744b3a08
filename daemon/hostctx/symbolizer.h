#ifndef GPUCTL_DAEMON_HOSTCTX_SYMBOLIZER_H_
#define GPUCTL_DAEMON_HOSTCTX_SYMBOLIZER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/hostctx/perf_record.h"

namespace gpuctl::hostctx {

// One frame of a call chain, as far as it could be named.
struct Frame {
  std::string function;  // empty when no symbol covers the address
  std::string module;    // the mapped file's path in the process, or "[jit]"
  uint64_t offset = 0;   // from the module's start (or the function's, when named)
};

// "function", else "module+0xoffset", else "0xaddress".
std::string FrameLabel(const Frame& frame, uint64_t address);

// Names addresses of a process. The interface the trace conversion uses, so
// tests can give it names of their own.
class FrameSymbolizer {
 public:
  virtual ~FrameSymbolizer() = default;
  // `address` is a sampled instruction pointer (the innermost frame) or a
  // return address (the callers: the call itself sits just before it).
  virtual Frame Symbolize(pid_t pid, uint64_t address, bool is_return_address) = 0;
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
// as the process's own namespace knows it). A process's maps and perf map
// are read at its first lookup (or LoadProcess) and kept: load a process
// while it still runs. Results are cached per process.
//
// Thread: not thread-safe.
class Symbolizer final : public FrameSymbolizer {
 public:
  explicit Symbolizer(std::string proc_root = "/proc");
  ~Symbolizer() override;
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Reads the process's maps and perf map now. False when neither could be
  // read (the process is gone, or its maps are not readable to the daemon).
  bool LoadProcess(pid_t pid);

  Frame Symbolize(pid_t pid, uint64_t address, bool is_return_address) override;
  // With elfutils' unwinder (dwfl_getthread_frames) over the modules of the
  // process as loaded: memory reads are answered from the sample's stack
  // copy only (nothing is read from the live process), so a frame whose
  // caller's state lies beyond the copy ends the chain. At most
  // kMaxCallchainDepth frames.
  std::vector<uint64_t> Unwind(const CpuSample& sample) override;

  // Forgets a process (it exited).
  void DropProcess(pid_t pid);

 private:
  class Process;
  Process* ProcessFor(pid_t pid);

  const std::string proc_root_;
  absl::flat_hash_map<pid_t, std::unique_ptr<Process>> processes_;
};

}  // namespace gpuctl::hostctx

#endif  // GPUCTL_DAEMON_HOSTCTX_SYMBOLIZER_H_
