#ifndef GPUCTL_DAEMON_ANALYSIS_MODEL_INDEX_H_
#define GPUCTL_DAEMON_ANALYSIS_MODEL_INDEX_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/analysis/trace_model.h"

namespace gpuctl::analysis {

// Look-ups the diagnoses share, built once per model: a GPU op's launching
// call, the host ranges and blocking calls of a thread. Holds pointers into
// the model, which must outlive it.
class ModelIndex {
 public:
  explicit ModelIndex(const TraceModel& model);

  // The runtime or driver call of `correlation` (a launch, copy or memset
  // call when several share it); nullptr when not in the trace.
  const ApiCall* CallOf(uint64_t correlation) const;
  // CallOf(model.gpu_ops[op].correlation), looked up once per op.
  const ApiCall* CallOfOp(size_t op) const { return op_calls_[op]; }

  // The range of thread (pid, tid) that overlaps [a, b) the most (ties: the
  // shorter one); nullptr when none does. Looks at most kMaxRangeScan
  // ranges back, which bounds the cost on pathological nesting.
  const HostRange* MostOverlapping(int64_t pid, int64_t tid, int64_t a, int64_t b) const;
  // The shortest range of thread (pid, tid) that contains [a, b).
  const HostRange* Innermost(int64_t pid, int64_t tid, int64_t a, int64_t b) const;

  // Whether a host-blocking call (a synchronize or a synchronous copy) of
  // thread (pid, tid) ended within [a, b].
  bool BlockingCallEndedIn(int64_t pid, int64_t tid, int64_t a, int64_t b) const;

  static constexpr int kMaxRangeScan = 4096;

 private:
  using Thread = std::pair<int64_t, int64_t>;
  struct Span {
    size_t begin = 0, end = 0;
  };
  template <typename Accept>
  const HostRange* Scan(int64_t pid, int64_t tid, int64_t a, int64_t b, Accept accept) const;

  const TraceModel& model_;
  absl::flat_hash_map<uint64_t, const ApiCall*> calls_;
  std::vector<const ApiCall*> op_calls_;  // by gpu_ops index
  absl::flat_hash_map<Thread, Span> thread_ranges_;
  std::vector<int64_t> max_end_;  // per range: the largest end up to it in its thread
  absl::flat_hash_map<Thread, std::vector<int64_t>> blocking_ends_;  // sorted
};

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_MODEL_INDEX_H_
