#ifndef GPUCTL_DAEMON_HOSTCTX_PERF_RECORD_H_
#define GPUCTL_DAEMON_HOSTCTX_PERF_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace gpuctl::hostctx {

// The records the sampler's perf events produce (sample_type
// PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN, sample_id_all:
// the non-sample records end with the thread ids and the time),
// decoded from bytes the kernel wrote into a ring buffer that the traced
// side cannot touch, yet checked field by field all the same: a record that
// does not fit its own header's size is rejected, never read past.

// Call chains longer than this are cut (the kernel's own default
// perf_event_max_stack is 127).
inline constexpr size_t kMaxCallchainDepth = 512;

// The user registers a DWARF-unwinding sample asks for
// (PERF_SAMPLE_REGS_USER's mask, x86-64's perf_regs.h order): the general
// registers, the stack pointer and the instruction pointer; the segment
// and flags registers are of no use to an unwinder.
inline constexpr uint64_t kUnwindRegsMask = 0xff01ff;  // AX..SP, IP, R8..R15
inline constexpr size_t kUnwindRegsCount = 17;
// perf_regs.h's positions in the mask's order (the bits, ascending).
enum UnwindReg : uint8_t {
  kRegAx = 0,
  kRegBx,
  kRegCx,
  kRegDx,
  kRegSi,
  kRegDi,
  kRegBp,
  kRegSp,
  kRegIp,
  kRegR8,
  kRegR9,
  kRegR10,
  kRegR11,
  kRegR12,
  kRegR13,
  kRegR14,
  kRegR15,
};
// The most bytes of user stack one sample copies (the kernel's own limit
// is a little under 64 KiB, the sample's size being a u16).
inline constexpr uint32_t kMaxStackCopyBytes = 60 << 10;

// What the records of one event carry beyond the fixed fields: the user
// registers and a copy of the user stack, when the sampler unwinds with
// DWARF call-frame information (SamplerOptions::dwarf_unwind).
struct SampleLayout {
  bool user_regs = false;   // PERF_SAMPLE_REGS_USER with kUnwindRegsMask
  bool user_stack = false;  // PERF_SAMPLE_STACK_USER
};

// The samples of the context-switch event (SamplerOptions::switch_stacks):
// on x86-64 they carry the user registers and the top kSwitchStackBytes of
// the stack whatever the cpu-clock's layout, so that the caller of the
// frame-pointer-less libc wrapper a thread blocks in (read, futex) is found
// by DWARF unwinding: the kernel's frame-pointer walk skips it.
#if defined(__x86_64__)
inline constexpr SampleLayout kSwitchStackLayout{.user_regs = true, .user_stack = true};
#else
inline constexpr SampleLayout kSwitchStackLayout{};
#endif
inline constexpr uint32_t kSwitchStackBytes = 1024;

struct CpuSample {
  uint32_t pid = 0;  // the thread group (process) id
  uint32_t tid = 0;
  uint64_t time_ns = 0;  // CLOCK_REALTIME
  // User-space return addresses, innermost first; the kernel's context
  // markers (PERF_CONTEXT_USER, ...) are left out.
  std::vector<uint64_t> ips;
  // With SampleLayout::user_regs and user_stack, for a sample taken in
  // user space: the registers (kUnwindRegsCount, UnwindReg order) and the
  // bytes of the stack from the stack pointer up, as far as the kernel
  // could copy them. Empty otherwise, or once the capture's stack budget
  // is spent.
  std::vector<uint64_t> user_regs;
  std::vector<uint8_t> user_stack;
  // Taken in the kernel (PERF_RECORD_MISC_KERNEL): the sampler's cpu-clock
  // samples exclude the kernel, so such a sample is its context-switch
  // event's, taken as the thread left the CPU (SamplerOptions::
  // switch_stacks). Its fields are kSwitchStackLayout's whatever `layout`
  // says.
  bool at_switch = false;
};

struct ContextSwitch {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t time_ns = 0;
  bool out = false;        // switched out (else in)
  bool preempted = false;  // switched out while still runnable
};

// A switch on one CPU seen by a CPU-wide event (PERF_RECORD_SWITCH_CPU_WIDE,
// sample_id_all with PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU):
// the task switched out or in (pid, tid) and the one on the other side of
// the switch (next_prev_*: the task coming in for a switch-out).
struct CpuSwitch {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t time_ns = 0;
  uint32_t cpu = 0;
  uint32_t next_prev_pid = 0;
  uint32_t next_prev_tid = 0;
  bool out = false;
  bool preempted = false;  // switched out while still runnable
};

// An executable mapping made by a sampled thread (PERF_RECORD_MMAP2: the
// sampler's events set mmap2, not mmap_data): what the process's maps
// would show for it, kept so that its frames can be named after it exits.
struct MmapRecord {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t time_ns = 0;
  uint64_t start = 0;
  uint64_t length = 0;
  uint64_t pgoff = 0;  // the file offset mapped at `start`
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  uint64_t inode = 0;
  uint32_t prot = 0;
  uint32_t flags = 0;
  // The file's path in the process's mount namespace ("//anon" for
  // anonymous executable memory, "[vdso]"), at most kMaxMmapPathBytes.
  std::string path;
};
inline constexpr size_t kMaxMmapPathBytes = 4096;

// A sampled thread called exec (PERF_RECORD_COMM with
// PERF_RECORD_MISC_COMM_EXEC, the sampler's events setting comm and
// comm_exec): the process's address space was replaced at `time_ns`; the
// new program's mappings follow as MmapRecords. A plain rename is an
// OtherRecord.
struct ExecRecord {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t time_ns = 0;
  std::string comm;  // the new program's name, at most kMaxCommBytes
};
inline constexpr size_t kMaxCommBytes = 16;  // the kernel's TASK_COMM_LEN

// A sampled thread created a thread or a process (PERF_RECORD_FORK, which
// events with comm or mmap set carry): the sampler opens the new thread at
// its next poll instead of waiting for a /proc rescan.
struct ForkRecord {
  uint32_t pid = 0;   // the new thread's process
  uint32_t ppid = 0;  // the creating thread's process: pid for a new thread
  uint32_t tid = 0;
  uint32_t ptid = 0;
  uint64_t time_ns = 0;
};

struct LostRecords {
  uint64_t count = 0;
};

// Any other record type: skipped, counted.
struct OtherRecord {
  uint32_t type = 0;
};

using PerfRecord = std::variant<CpuSample, ContextSwitch, CpuSwitch, MmapRecord, ExecRecord,
                                ForkRecord, LostRecords, OtherRecord>;

// Decodes one whole record (its 8-byte header included), of an event whose
// samples carry what `layout` says.
absl::StatusOr<PerfRecord> ParseRecord(absl::Span<const uint8_t> record,
                                       const SampleLayout& layout = {});

struct RingDrainStats {
  uint64_t records = 0;
  // The ring held bytes that are not a record (a size under the header's,
  // past the written data or over the ring): the rest of what was written
  // is skipped.
  uint64_t corrupt = 0;
};

// Copies each whole record between `tail` and `head` out of the ring's data
// area (`data`, a power-of-two size), joining the two halves of one that
// wraps around, and hands it to `on_record`. Returns the new tail: `head`
// once everything was consumed. `head` and `tail` are the kernel's
// free-running byte counters.
uint64_t DrainRing(absl::Span<const uint8_t> data, uint64_t head, uint64_t tail,
                   absl::FunctionRef<void(absl::Span<const uint8_t>)> on_record,
                   RingDrainStats* stats);

}  // namespace gpuctl::hostctx

#endif  // GPUCTL_DAEMON_HOSTCTX_PERF_RECORD_H_
