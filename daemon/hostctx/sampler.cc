#include "daemon/hostctx/sampler.h"

#include <linux/perf_event.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/hostctx/proc_tasks.h"

namespace gpuctl::hostctx {
namespace {

constexpr size_t kMaxReportedErrors = 16;
constexpr size_t kMaxRingPages = 4096;  // 16 MiB per thread

constexpr size_t kMaxCommBytes = 64;

// A comm file's content without its newline.
std::string ReadComm(const std::string& path) {
  std::string comm = ReadSmallFile(path, kMaxCommBytes);
  while (!comm.empty() && (comm.back() == '\n' || comm.back() == '\0')) comm.pop_back();
  return comm;
}

uint64_t NowNs(Clock* clock) { return static_cast<uint64_t>(absl::ToUnixNanos(clock->Now())); }

// A software event of `config` on CLOCK_REALTIME (the trace's clock; every
// event sharing a ring must use one clock), with sample fields on every
// record (sample_id_all).
perf_event_attr SoftwareAttr(uint64_t config) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = config;
  attr.use_clockid = 1;
  attr.clockid = CLOCK_REALTIME;
  attr.sample_id_all = 1;
  return attr;
}

perf_event_attr SamplingAttr(const SamplerOptions& options) {
  perf_event_attr attr = SoftwareAttr(PERF_COUNT_SW_CPU_CLOCK);
  attr.freq = 1;
  attr.sample_freq = static_cast<uint64_t>(options.frequency_hz);
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
  if (options.dwarf_unwind) {
    attr.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    attr.sample_regs_user = kUnwindRegsMask;
    attr.sample_stack_user = options.stack_bytes;
  }
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.exclude_callchain_kernel = 1;
  attr.context_switch = 1;
  // The thread's executable mmaps (mmap2: with the file's device, inode
  // and offset; mmap_data stays 0, so heap and data mappings write
  // nothing) and its execs (comm_exec marks a comm record as one): a
  // process's frames can then be named after it exits or exec's.
  attr.mmap = 1;
  attr.mmap2 = 1;
  attr.comm = 1;
  attr.comm_exec = 1;
  return attr;
}

// Samples every context switch of the thread (period 1) with the user call
// chain. The kernel takes the sample in the scheduler with kernel
// registers, which exclude_kernel would drop: the kernel part of the chain
// is left out instead. Same clock as the ring's event, as
// PERF_EVENT_IOC_SET_OUTPUT requires.
perf_event_attr SwitchStackAttr() {
  perf_event_attr attr = SoftwareAttr(PERF_COUNT_SW_CONTEXT_SWITCHES);
  attr.sample_period = 1;
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
  if (kSwitchStackLayout.user_regs) {
    attr.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    attr.sample_regs_user = kUnwindRegsMask;
    attr.sample_stack_user = kSwitchStackBytes;
  }
  attr.exclude_hv = 1;
  attr.exclude_callchain_kernel = 1;
  return attr;
}

// Every switch on one CPU (PERF_RECORD_SWITCH_CPU_WIDE), on the clock of
// the threads' events.
perf_event_attr CpuWideSwitchAttr() {
  perf_event_attr attr = SoftwareAttr(PERF_COUNT_SW_DUMMY);
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
  attr.context_switch = 1;
  return attr;
}

// Preempting processes named per capture.
constexpr size_t kMaxPreemptorNames = 256;

// The ring's data pages: SamplerOptions::ring_pages, grown with
// dwarf_unwind to hold the stack copies of a quarter second of one busy
// thread, at least kUnwindRingSamples (a power of two, at most
// kMaxRingPages).
size_t RingPages(const SamplerOptions& options, size_t page) {
  size_t pages = options.ring_pages;
  if (!options.dwarf_unwind) return pages;
  const size_t samples = std::max<size_t>(HostSampler::kUnwindRingSamples,
                                          static_cast<size_t>(options.frequency_hz) / 4);
  const size_t wanted = samples * (options.stack_bytes + 1024) / page;
  while (pages < wanted && pages < kMaxRingPages) pages *= 2;
  return pages;
}

absl::Status OpenError(pid_t tid, int err) {
  const std::string what = absl::StrCat("perf_event_open on thread ", tid, ": ", strerror(err));
  if (err == EACCES || err == EPERM) {
    return absl::PermissionDeniedError(absl::StrCat(
        what,
        "; sampling another user's process needs CAP_PERFMON (or CAP_SYS_ADMIN), and the "
        "same user needs kernel.perf_event_paranoid <= 2"));
  }
  if (err == ESRCH || err == ENOENT) return absl::NotFoundError(what);
  return absl::UnavailableError(what);
}

}  // namespace

// One thread's perf event and its mapped ring buffer.
class HostSampler::ThreadRing {
 public:
  // `switch_fd`: the thread's context-switch event writing into this ring,
  // or -1.
  ThreadRing(pid_t tid, int fd, int switch_fd, void* base, size_t map_bytes)
      : tid_(tid), fd_(fd), switch_fd_(switch_fd), base_(base), map_bytes_(map_bytes) {}
  ~ThreadRing() {
    if (switch_fd_ >= 0) close(switch_fd_);
    munmap(base_, map_bytes_);
    close(fd_);
  }
  ThreadRing(const ThreadRing&) = delete;
  ThreadRing& operator=(const ThreadRing&) = delete;

  pid_t tid() const { return tid_; }
  void Disable() {
    if (switch_fd_ >= 0) ioctl(switch_fd_, PERF_EVENT_IOC_DISABLE, 0);
    ioctl(fd_, PERF_EVENT_IOC_DISABLE, 0);
  }

  template <typename OnRecord>
  void Drain(OnRecord&& on_record, RingDrainStats* stats) {
    auto* meta = static_cast<perf_event_mmap_page*>(base_);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    uint64_t offset = meta->data_offset;
    uint64_t size = meta->data_size;
    if (offset == 0 || size == 0) {  // kernels before 4.1
      offset = page;
      size = map_bytes_ - page;
    }
    if (offset > map_bytes_ || size > map_bytes_ - offset) {
      ++stats->corrupt;
      return;
    }
    const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    const uint64_t tail = meta->data_tail;
    const absl::Span<const uint8_t> data(static_cast<const uint8_t*>(base_) + offset, size);
    const uint64_t new_tail = DrainRing(data, head, tail, on_record, stats);
    __atomic_store_n(&meta->data_tail, new_tail, __ATOMIC_RELEASE);
  }

 private:
  const pid_t tid_;
  const int fd_;
  const int switch_fd_;
  void* const base_;
  const size_t map_bytes_;
};

HostSampler::HostSampler(SamplerOptions options, Clock* clock)
    : options_(std::move(options)), clock_(clock) {}

HostSampler::~HostSampler() = default;

absl::Status HostSampler::Start(const std::vector<pid_t>& pids, const std::vector<pid_t>& apart) {
  if (running_) return absl::FailedPreconditionError("the host sampler is already running");
  if (options_.frequency_hz <= 0 || options_.ring_pages == 0 ||
      options_.ring_pages > kMaxRingPages ||
      (options_.ring_pages & (options_.ring_pages - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("host sampling needs a positive frequency (got ", options_.frequency_hz,
                     ") and a power-of-two ring size of at most ", kMaxRingPages, " pages (got ",
                     options_.ring_pages, ")"));
  }
  if (options_.dwarf_unwind) {
#if !defined(__x86_64__)
    return absl::UnimplementedError("DWARF unwinding of host samples is implemented for x86-64");
#endif
    if (options_.stack_bytes == 0 || options_.stack_bytes % 8 != 0 ||
        options_.stack_bytes > kMaxStackCopyBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("the stack copy of a DWARF-unwound sample is a multiple of 8 bytes up to ",
                       kMaxStackCopyBytes, " (got ", options_.stack_bytes, ")"));
    }
  }
  capture_ = HostCapture();
  cpu_rings_.clear();
  watched_cpus_.clear();
  cpu_wide_refused_ = false;
  stack_entries_ = 0;
  stack_copy_bytes_ = 0;
  mappings_kept_ = 0;
  forked_.clear();
  roots_held_.clear();
  rings_.clear();
  opened_.clear();
  roots_ = pids;
  apart_ = apart;
  capture_.roots = pids;
  capture_.start_ns = NowNs(clock_);
  OpenThreadsOf(pids);
  if (!rings_.empty()) {
    running_ = true;
    return absl::OkStatus();
  }
  for (const ThreadError& error : capture_.errors) {
    if (absl::IsPermissionDenied(error.status)) return error.status;
  }
  if (!capture_.errors.empty()) return capture_.errors.front().status;
  return absl::NotFoundError(absl::StrCat("no thread of the ", pids.size(),
                                          " processes to sample is alive under ",
                                          options_.proc_root));
}

size_t HostSampler::Rescan() {
  if (!running_) return 0;
  const size_t before = rings_.size();
  OpenThreadsOf(roots_);
  return rings_.size() - before;
}

void HostSampler::OpenThreadsOf(const std::vector<pid_t>& pids) {
  for (pid_t pid : ProcessesWithDescendants(options_.proc_root, pids, apart_)) {
    for (pid_t tid : ThreadsOf(options_.proc_root, pid)) {
      if (opened_.contains(tid)) continue;
      if (opened_.size() >= options_.max_threads) {
        ++capture_.threads_over_cap;
        continue;
      }
      OpenThread(pid, tid);
    }
  }
}

void HostSampler::OpenThread(pid_t pid, pid_t tid) {
  perf_event_attr attr = SamplingAttr(options_);
  const int fd =
      static_cast<int>(syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
  absl::Status failure;
  if (fd < 0) {
    failure = OpenError(tid, errno);
  } else {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t map_bytes = (RingPages(options_, page) + 1) * page;
    void* base = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      const int err = errno;
      close(fd);
      failure = absl::ResourceExhaustedError(absl::StrCat(
          "mapping the ring buffer of thread ", tid, ": ", strerror(err),
          err == EPERM ? " (kernel.perf_event_mlock_kb is too small for the rings)" : ""));
    } else {
      opened_.insert(tid);
      const int switch_fd = options_.switch_stacks ? OpenSwitchStacks(tid, fd) : -1;
      rings_.push_back(std::make_unique<ThreadRing>(tid, fd, switch_fd, base, map_bytes));
      if (options_.cpu_wide_switches) WatchCpusOf(tid);
      if (!capture_.images.contains(pid)) {
        // After the event opened: a mapping made since is in its ring.
        ProcessImage image = SnapshotProcess(options_.proc_root, pid, NowNs(clock_),
                                             options_.max_mappings - mappings_kept_, &roots_held_);
        for (const AddressSpaceChange& change : image.changes) {
          mappings_kept_ += change.mappings.size();
        }
        capture_.images.emplace(pid, std::move(image));
      }
      capture_.threads.push_back(SampledThread{
          pid, tid, NowNs(clock_),
          ReadComm(absl::StrCat(options_.proc_root, "/", pid, "/task/", tid, "/comm")),
          ReadComm(absl::StrCat(options_.proc_root, "/", pid, "/comm"))});
      return;
    }
  }
  if (absl::IsNotFound(failure)) {
    // The thread exited after it was listed: not an error.
    ++capture_.threads_gone;
    return;
  }
  opened_.insert(tid);  // not retried on every Rescan
  ++capture_.error_count;
  if (capture_.errors.size() < kMaxReportedErrors) {
    capture_.errors.push_back(ThreadError{tid, std::move(failure)});
  }
}

int HostSampler::OpenSwitchStacks(pid_t tid, int ring_fd) {
  perf_event_attr attr = SwitchStackAttr();
  const int fd =
      static_cast<int>(syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
  int err = errno;
  if (fd >= 0 && ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ring_fd) == 0) return fd;
  if (fd >= 0) {
    err = errno;
    close(fd);
  }
  if (err == ESRCH || err == ENOENT) return -1;  // exited; its ring says so
  if (capture_.switch_stack_errors++ == 0) {
    std::string why = absl::StrCat("the context-switch event of thread ", tid, ": ", strerror(err));
    if (err == EACCES || err == EPERM) {
      absl::StrAppend(&why,
                      "; call chains at switch-out need CAP_PERFMON or "
                      "kernel.perf_event_paranoid <= 1");
    }
    capture_.switch_stack_error = absl::UnavailableError(why);
  }
  return -1;
}

void HostSampler::WatchCpusOf(pid_t tid) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(tid, sizeof(allowed), &allowed) != 0) return;  // exited
  for (int cpu = 0; cpu < CPU_SETSIZE && !cpu_wide_refused_; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed) || watched_cpus_.contains(cpu)) continue;
    if (watched_cpus_.size() >= options_.max_cpus) return;
    watched_cpus_.insert(cpu);
    OpenCpuRing(cpu);
  }
}

void HostSampler::OpenCpuRing(int cpu) {
  perf_event_attr attr = CpuWideSwitchAttr();
  const int fd =
      static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
  const int err = errno;
  if (fd < 0) {
    if (err == ENODEV || err == ENXIO) return;  // an offline CPU
    cpu_wide_refused_ = true;
    std::string why = absl::StrCat("the CPU-wide switch event of CPU ", cpu, ": ", strerror(err));
    if (err == EACCES || err == EPERM) {
      absl::StrAppend(&why,
                      "; naming the process that preempted a thread needs CAP_PERFMON (or "
                      "CAP_SYS_ADMIN) or kernel.perf_event_paranoid <= 0");
    }
    capture_.cpu_wide_error = absl::PermissionDeniedError(why);
    return;
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t map_bytes = (std::min(options_.ring_pages * 4, kMaxRingPages) + 1) * page;
  void* base = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int map_err = errno;
    close(fd);
    cpu_wide_refused_ = true;
    capture_.cpu_wide_error = absl::ResourceExhaustedError(
        absl::StrCat("mapping the ring buffer of CPU ", cpu, ": ", strerror(map_err)));
    return;
  }
  cpu_rings_.push_back(std::make_unique<ThreadRing>(cpu, fd, -1, base, map_bytes));
  ++capture_.cpus_watched;
}

void HostSampler::NamePreemptors() {
  for (const CpuSwitch& sw : capture_.preemptions) {
    if (capture_.preemptor_names.size() >= kMaxPreemptorNames) return;
    if (sw.next_prev_pid == 0 || capture_.preemptor_names.contains(sw.next_prev_pid)) continue;
    std::string comm = ReadComm(absl::StrCat(options_.proc_root, "/", sw.next_prev_pid, "/comm"));
    if (!comm.empty()) capture_.preemptor_names.emplace(sw.next_prev_pid, std::move(comm));
  }
}

void HostSampler::OnRecord(absl::Span<const uint8_t> record) {
  const SampleLayout layout{.user_regs = options_.dwarf_unwind,
                            .user_stack = options_.dwarf_unwind};
  absl::StatusOr<PerfRecord> parsed = ParseRecord(record, layout);
  if (!parsed.ok()) {
    ++capture_.corrupt_records;
    return;
  }
  if (auto* sample = std::get_if<CpuSample>(&*parsed); sample != nullptr && sample->at_switch) {
    if (capture_.switch_stacks.size() >= options_.max_switches ||
        stack_entries_ + sample->ips.size() > options_.max_stack_entries) {
      ++capture_.dropped_switches;
      return;
    }
    stack_entries_ += sample->ips.size();
    // Past the copies' budget a switch-out keeps its frame-pointer chain.
    if (stack_copy_bytes_ + sample->user_stack.size() > options_.max_stack_copy_bytes) {
      sample->user_stack = {};
      sample->user_regs = {};
    }
    stack_copy_bytes_ += sample->user_stack.size();
    capture_.switch_stacks.push_back(std::move(*sample));
  } else if (sample != nullptr) {
    if (capture_.samples.size() >= options_.max_samples ||
        stack_entries_ + sample->ips.size() > options_.max_stack_entries) {
      ++capture_.dropped_samples;
      return;
    }
    stack_entries_ += sample->ips.size();
    if (!sample->user_stack.empty()) {
      if (stack_copy_bytes_ + sample->user_stack.size() > options_.max_stack_copy_bytes) {
        ++capture_.stacks_dropped;
        sample->user_stack = {};
        sample->user_regs = {};
      } else {
        stack_copy_bytes_ += sample->user_stack.size();
      }
    }
    capture_.samples.push_back(std::move(*sample));
  } else if (auto* sw = std::get_if<ContextSwitch>(&*parsed)) {
    if (capture_.switches.size() >= options_.max_switches) {
      ++capture_.dropped_switches;
      return;
    }
    capture_.switches.push_back(*sw);
  } else if (auto* cpu_switch = std::get_if<CpuSwitch>(&*parsed)) {
    // Every task's switches on the CPU: only a sampled thread's preemption
    // is kept.
    if (!cpu_switch->preempted || !opened_.contains(static_cast<pid_t>(cpu_switch->tid))) return;
    if (capture_.preemptions.size() >= options_.max_switches) {
      ++capture_.dropped_switches;
      return;
    }
    capture_.preemptions.push_back(*cpu_switch);
  } else if (auto* mmap = std::get_if<MmapRecord>(&*parsed)) {
    // Anonymous executable memory (a JIT's) has no file: perf maps name it.
    if (mmap->path[0] != '/' && mmap->path != "[vdso]") return;
    AddressSpaceChange change;
    change.time_ns = mmap->time_ns;
    change.mappings.push_back(Mapping{mmap->start, mmap->start + mmap->length, mmap->pgoff,
                                      mmap->dev_major, mmap->dev_minor, mmap->inode,
                                      std::move(mmap->path)});
    AddImageChange(mmap->pid, std::move(change));
  } else if (auto* exec = std::get_if<ExecRecord>(&*parsed)) {
    // A worker that exec'd a compiler is named by the compiler.
    for (SampledThread& thread : capture_.threads) {
      if (thread.pid != static_cast<pid_t>(exec->pid)) continue;
      thread.process_name = exec->comm;
      if (thread.tid == static_cast<pid_t>(exec->tid)) thread.name = exec->comm;
    }
    AddressSpaceChange change;
    change.time_ns = exec->time_ns;
    change.exec = true;
    AddImageChange(exec->pid, std::move(change));
  } else if (auto* fork = std::get_if<ForkRecord>(&*parsed)) {
    if (!opened_.contains(static_cast<pid_t>(fork->tid))) {
      forked_.emplace_back(static_cast<pid_t>(fork->pid), static_cast<pid_t>(fork->tid));
    }
  } else if (auto* lost = std::get_if<LostRecords>(&*parsed)) {
    capture_.lost_records += lost->count;
  }
}

void HostSampler::AddImageChange(uint32_t pid, AddressSpaceChange change) {
  // An exec counts as a mapping: the bound is on the changes kept.
  const size_t cost = std::max<size_t>(change.mappings.size(), 1);
  if (mappings_kept_ + cost > options_.max_mappings) {
    ++capture_.dropped_mappings;
    return;
  }
  mappings_kept_ += cost;
  capture_.images[static_cast<pid_t>(pid)].changes.push_back(std::move(change));
}

void HostSampler::Poll() {
  DrainRings();
  // Rings opened here are drained at the next poll.
  std::vector<std::pair<pid_t, pid_t>> forked = std::move(forked_);
  forked_.clear();
  for (const std::pair<pid_t, pid_t>& thread : forked) {
    // A process recorded apart is never a new child of a sampled one, but
    // a pid could be reused.
    if (opened_.contains(thread.second) ||
        std::find(apart_.begin(), apart_.end(), thread.first) != apart_.end()) {
      continue;
    }
    if (opened_.size() >= options_.max_threads) {
      ++capture_.threads_over_cap;
      continue;
    }
    OpenThread(thread.first, thread.second);
  }
}

void HostSampler::DrainRings() {
  RingDrainStats stats;
  for (auto& ring : rings_) {
    ring->Drain([this](absl::Span<const uint8_t> record) { OnRecord(record); }, &stats);
  }
  for (auto& ring : cpu_rings_) {
    ring->Drain([this](absl::Span<const uint8_t> record) { OnRecord(record); }, &stats);
  }
  capture_.corrupt_records += stats.corrupt;
}

HostCapture HostSampler::Stop() {
  for (auto& ring : rings_) ring->Disable();
  for (auto& ring : cpu_rings_) ring->Disable();
  capture_.stop_ns = NowNs(clock_);
  DrainRings();
  forked_.clear();
  NamePreemptors();
  rings_.clear();
  cpu_rings_.clear();
  watched_cpus_.clear();
  opened_.clear();
  roots_held_.clear();  // the images hold the roots they use
  running_ = false;
  HostCapture out = std::move(capture_);
  capture_ = HostCapture();
  return out;
}

}  // namespace gpuctl::hostctx
