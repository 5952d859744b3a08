#ifndef GPUCTL_DAEMON_HOSTCTX_WINDOW_EVENTS_H_
#define GPUCTL_DAEMON_HOSTCTX_WINDOW_EVENTS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "daemon/hostctx/off_cpu.h"
#include "daemon/hostctx/sampler.h"
#include "daemon/hostctx/symbolizer.h"
#include "gpuctl/v1/manifest.pb.h"

namespace gpuctl::hostctx {

// One window's capture, symbolized, ready to be written into trace files
// (each cut to its process's own window). Built once, off the recording
// thread; afterwards immutable and safe to use from any thread.
class WindowEvents {
 public:
  // Symbolizes every frame of `capture` with `symbolizer` now (a Symbolizer
  // given the capture's images names the frames of processes gone since;
  // one without reads maps at the first lookup, while they run),
  // a sample with a stack copy unwound first (BestCallChain),
  // and computes the off-CPU intervals. `samples` / `switches` choose what
  // is written (activities cpu / sched).
  //
  // `own_tids` maps a traced process's thread ids as the daemon sees them
  // to the ids in the process's own pid namespace (NamespaceThreadIds),
  // which its trace records use: its rows are written with those, so a
  // thread's samples share its row with its gpuctl ranges. Threads of
  // descendants keep the daemon's ids, as their pids do.
  WindowEvents(HostCapture capture, FrameSymbolizer* symbolizer, bool samples, bool switches,
               absl::flat_hash_map<pid_t, pid_t> own_tids = {});

  struct Written {
    uint64_t samples = 0;
    uint64_t off_cpu_intervals = 0;
  };
  // Hands `sink` the events of [window_start_ns, window_end_ns] as JSON
  // objects (host_trace_json.h), times from `base_time_ns`: the names of
  // the threads and helper processes, the samples inside the window, the
  // off-CPU intervals cut to it.
  Written Write(int64_t base_time_ns, int64_t window_start_ns, int64_t window_end_ns,
                absl::FunctionRef<void(absl::string_view)> sink) const;

  // The capture's counts: state RECORDED, switches, threads, processes,
  // lost and dropped records, thread errors (the first one's message as
  // the reason). Samples and intervals are counted by Write.
  v1::HostContextResult Summary() const;

 private:
  class Frames;

  // Unwinds a sample's stack copy into its chain (and frees it), then
  // names its frames.
  void AddFrames(CpuSample& sample, FrameSymbolizer* symbolizer);

  HostCapture capture_;
  absl::flat_hash_map<pid_t, pid_t> own_tids_;
  std::vector<OffCpuInterval> off_cpu_;
  // Samples had stack copies; how many got a deeper chain from them.
  bool dwarf_ = false;
  uint64_t dwarf_unwound_ = 0;
  struct FrameKey {
    uint32_t pid;
    uint32_t space;  // FrameSymbolizer::AddressSpaceAt
    uint64_t address;
    bool is_return_address;
    template <typename H>
    friend H AbslHashValue(H h, const FrameKey& k) {
      return H::combine(std::move(h), k.pid, k.space, k.address, k.is_return_address);
    }
    bool operator==(const FrameKey&) const = default;
  };
  absl::flat_hash_map<FrameKey, Frame> frames_;
  // Of processes that exec'd: the time of the first sample in each of
  // their later address spaces, and its number, by time.
  using SpaceStarts = absl::flat_hash_map<pid_t, std::vector<std::pair<uint64_t, uint32_t>>>;
  SpaceStarts spaces_;
  absl::flat_hash_map<std::pair<pid_t, uint32_t>, uint64_t> space_samples_;  // at construction
};

// The thread ids of the capture's roots (the traced processes) in their
// own pid namespaces, from the last NSpid of <proc_root>/<pid>/task/<tid>/
// status, for the threads whose ids differ there; read while the
// processes run (a thread gone keeps the daemon's id).
absl::flat_hash_map<pid_t, pid_t> NamespaceThreadIds(const std::string& proc_root,
                                                     const HostCapture& capture);

}  // namespace gpuctl::hostctx

#endif  // GPUCTL_DAEMON_HOSTCTX_WINDOW_EVENTS_H_
