#ifndef GPUCTL_DAEMON_HOSTCTX_SAMPLER_H_
#define GPUCTL_DAEMON_HOSTCTX_SAMPLER_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "daemon/common/clock.h"
#include "daemon/hostctx/perf_record.h"
#include "daemon/hostctx/process_image.h"

namespace gpuctl::hostctx {

struct SamplerOptions {
  // Where /proc is read: threads from <proc_root>/<pid>/task, descendants
  // from the ppid of every <proc_root>/<n>/stat.
  std::string proc_root = "/proc";
  // Samples per second of CPU time, per thread (a software cpu-clock event).
  int frequency_hz = 99;
  // Data pages of each thread's ring buffer (a power of two, at most
  // 4096). 16 pages
  // (64 KiB) hold at least 60 samples of the deepest call chain the kernel
  // gives by default, over half a second of one busy thread at 99 Hz:
  // Poll() is to run several times a second.
  size_t ring_pages = 16;
  // Unwind with DWARF call-frame information as well as frame pointers:
  // each sample also carries the thread's user registers and a copy of the
  // top `stack_bytes` of its user stack (PERF_SAMPLE_REGS_USER |
  // PERF_SAMPLE_STACK_USER), which the Symbolizer unwinds through the
  // modules' .eh_frame/.debug_frame (Symbolizer::Unwind). Debian's
  // packages and PyTorch's wheels are built without frame pointers, so
  // frame-pointer chains through them are one or two frames deep. x86-64
  // only. A sample's record grows by `stack_bytes`: the rings grow to hold
  // a quarter second of a busy thread's samples, at least
  // kUnwindRingSamples (512 KiB per thread at 99 Hz, 4 MiB at 999 Hz).
  bool dwarf_unwind = false;
  uint32_t stack_bytes = 8192;  // a multiple of 8, at most kMaxStackCopyBytes
  // The stack copies one capture keeps, in bytes; later samples keep their
  // frame-pointer chain only (counted in HostCapture::stacks_dropped).
  size_t max_stack_copy_bytes = size_t{64} << 20;
  // Bounds on what one capture keeps; what comes beyond is counted.
  size_t max_threads = 4096;
  size_t max_samples = 200000;
  size_t max_stack_entries = 4000000;  // 32 MiB of return addresses
  size_t max_switches = 1000000;
  // Mappings kept of the sampled processes' address spaces (their maps
  // when first seen, then each executable mmap and exec), so that frames
  // are named after a process exits or exec's (HostCapture::images).
  size_t max_mappings = size_t{1} << 17;
  // Also record each thread's user call chain as it leaves the CPU: a
  // software context-switch event sampling every switch, writing into the
  // thread's ring, so an off-CPU interval names what the thread blocked in
  // (`read` and its caller). Its samples are taken in the kernel, so the
  // event cannot exclude the kernel (user chains only all the same): it
  // needs CAP_PERFMON or kernel.perf_event_paranoid <= 1; a thread refused
  // keeps its other records (HostCapture::switch_stack_errors).
  bool switch_stacks = false;
  // Also watch every switch on the CPUs the sampled threads may run on
  // (their affinity), with one CPU-wide event per CPU, so that a preempted
  // thread's interval names the task that took its CPU. Each CPU's ring
  // has 4 x ring_pages (at most 4096). CPU-wide events need CAP_PERFMON (or
  // CAP_SYS_ADMIN) or kernel.perf_event_paranoid <= 0; when refused, the
  // capture says why (HostCapture::cpu_wide_error) and keeps the rest.
  bool cpu_wide_switches = false;
  size_t max_cpus = 1024;
};

// Why a thread is not sampled.
struct ThreadError {
  pid_t tid = 0;
  absl::Status status;
};

// A thread the capture had an event open on.
struct SampledThread {
  pid_t pid = 0;
  pid_t tid = 0;
  uint64_t opened_ns = 0;  // when its event opened (CLOCK_REALTIME)
  // The thread's and its process's names (comm) when opened, or the
  // program's it exec'd since; the process's to choose, so untrusted.
  std::string name;
  std::string process_name;
};

// What one capture recorded, on CLOCK_REALTIME nanoseconds.
struct HostCapture {
  uint64_t start_ns = 0;
  uint64_t stop_ns = 0;
  std::vector<CpuSample> samples;
  std::vector<ContextSwitch> switches;
  // With switch_stacks: the call chain of each switch-out (at_switch
  // samples), bounded by max_switches and max_stack_entries with the rest;
  // OffCpuIntervals pairs them with the intervals.
  std::vector<CpuSample> switch_stacks;
  // Threads whose context-switch event could not be opened, and why (the
  // first one).
  size_t switch_stack_errors = 0;
  absl::Status switch_stack_error;
  // With cpu_wide_switches: each switch-out of a sampled thread while it
  // was runnable, with the task that took its CPU (bounded by
  // max_switches, the rest in dropped_switches); the comm of each of those
  // tasks' processes, read when the capture stopped (the first 256; a
  // process gone by then has none); the CPUs watched, and why none or not
  // all could be.
  std::vector<CpuSwitch> preemptions;
  absl::flat_hash_map<uint32_t, std::string> preemptor_names;
  size_t cpus_watched = 0;
  absl::Status cpu_wide_error;
  // Each sampled process's root and address space over the window (its
  // maps when its first thread was opened, then the executable mappings
  // and execs its sampled threads made), for the Symbolizer: a compiler
  // subprocess or a short DataLoader worker is gone by the time frames
  // are named. Past max_mappings, mappings are counted in
  // dropped_mappings instead.
  absl::flat_hash_map<pid_t, ProcessImage> images;
  uint64_t dropped_mappings = 0;
  // The processes given to Start; the others sampled are descendants.
  std::vector<pid_t> roots;
  // Threads that had events open (every thread of every process sampled).
  std::vector<SampledThread> threads;
  // The kernel's PERF_RECORD_LOST counts: records that did not fit a ring.
  uint64_t lost_records = 0;
  // Records past the capture's caps.
  uint64_t dropped_samples = 0;
  // With dwarf_unwind: samples whose stack copy was not kept
  // (max_stack_copy_bytes spent); they keep their frame-pointer chain.
  uint64_t stacks_dropped = 0;
  uint64_t dropped_switches = 0;
  // Rings that held bytes that are not a record; the rest was skipped.
  uint64_t corrupt_records = 0;
  // Threads that exited between being listed and being opened.
  size_t threads_gone = 0;
  // Threads left out at max_threads (counted at each Rescan or fork that
  // meets them).
  size_t threads_over_cap = 0;
  // Threads that could not be opened for another reason (the first 16).
  std::vector<ThreadError> errors;
  size_t error_count = 0;
};

// Samples the threads of a set of processes and of their descendants with
// one perf event per thread: a software cpu-clock at `frequency_hz` with
// user call chains (frame pointers), the thread's context switches, its
// executable mmaps and its execs (HostCapture::images).
// Timestamps are CLOCK_REALTIME (use_clockid), the clock of GPU traces.
//
// Thread: not thread-safe; one owner calls Start, Rescan, Poll and Stop.
// Nothing runs between calls: the owner polls often enough for the rings
// (SamplerOptions::ring_pages). Destruction closes every event.
class HostSampler {
 public:
  // With dwarf_unwind, each ring holds at least this many samples' stacks.
  static constexpr size_t kUnwindRingSamples = 32;

  HostSampler(SamplerOptions options, Clock* clock);
  ~HostSampler();
  HostSampler(const HostSampler&) = delete;
  HostSampler& operator=(const HostSampler&) = delete;

  // Opens an event on every thread of `pids` and of their descendants alive
  // now, but for the processes `apart` (recorded by another capture) and
  // their descendants, now and at each Rescan. Fails when none could be opened: PermissionDenied
  // (with what the daemon lacks) when perf_event_open was refused, NotFound when the processes are
  // gone, FailedPrecondition when already started. Threads that fail while others succeed are
  // reported in the capture.
  absl::Status Start(const std::vector<pid_t>& pids, const std::vector<pid_t>& apart = {});

  // Opens the threads and descendants that appeared since Start or the
  // last Rescan. Returns how many were added.
  size_t Rescan();

  // Moves what the rings hold into the capture, then opens the threads
  // and processes that sampled threads created since (their fork records),
  // so that a worker is followed from its first poll, not the next Rescan.
  void Poll();

  // Stops every event, drains the rings and returns the capture; the
  // sampler can then be started again.
  HostCapture Stop();

  bool running() const { return running_; }

 private:
  class ThreadRing;

  void OpenThreadsOf(const std::vector<pid_t>& pids);
  void OpenThread(pid_t pid, pid_t tid);
  // The context-switch event of `tid`, writing into the ring of `ring_fd`;
  // -1 (counted in the capture) when refused.
  int OpenSwitchStacks(pid_t tid, int ring_fd);
  // The CPU-wide switch events of the CPUs `tid` may run on that are not
  // watched yet.
  void WatchCpusOf(pid_t tid);
  void OpenCpuRing(int cpu);
  void NamePreemptors();
  void DrainRings();
  void OnRecord(absl::Span<const uint8_t> record);
  // Keeps a change of `pid`'s address space, within max_mappings.
  void AddImageChange(uint32_t pid, AddressSpaceChange change);

  const SamplerOptions options_;
  Clock* const clock_;
  bool running_ = false;
  std::vector<pid_t> roots_;
  std::vector<pid_t> apart_;
  std::vector<std::unique_ptr<ThreadRing>> rings_;
  std::vector<std::unique_ptr<ThreadRing>> cpu_rings_;
  absl::flat_hash_set<int> watched_cpus_;
  bool cpu_wide_refused_ = false;
  absl::flat_hash_set<pid_t> opened_;
  size_t stack_entries_ = 0;
  size_t stack_copy_bytes_ = 0;
  size_t mappings_kept_ = 0;
  // Threads created by sampled threads since the last poll (pid, tid).
  std::vector<std::pair<pid_t, pid_t>> forked_;
  // The sampled processes' root directories, one per distinct directory.
  std::vector<std::shared_ptr<const UniqueFd>> roots_held_;
  HostCapture capture_;
};

}  // namespace gpuctl::hostctx

#endif  // GPUCTL_DAEMON_HOSTCTX_SAMPLER_H_
