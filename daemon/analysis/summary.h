#ifndef GPUCTL_DAEMON_ANALYSIS_SUMMARY_H_
#define GPUCTL_DAEMON_ANALYSIS_SUMMARY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "daemon/analysis/diagnoses.h"
#include "daemon/analysis/trace_model.h"

namespace gpuctl::analysis {

// A process's trace in a few numbers: what gpuctld stores in the manifest
// at ingest and `gpuctl analyze` reports as "summary" (docs/analyze.md).
struct ProcessSummary {
  // The breakdown's process classes: first to last GPU op of the process
  // (its GPUs as one), busy = compute + communication + memory, idle the
  // rest. All zero without GPU ops.
  int64_t gpu_span_ns = 0;
  int64_t compute_ns = 0, communication_ns = 0, memory_ns = 0, idle_ns = 0;
  int64_t busy_ns() const { return compute_ns + communication_ns + memory_ns; }
  // Whole steps (ProfilerStep#N, merged across threads by N; a step cut by
  // the window's end is left out) and their durations' percentiles.
  uint64_t steps = 0;
  int64_t step_p50_ns = 0, step_p99_ns = 0;
  // The kernel (compute or NCCL) name with the most GPU time; empty when
  // no kernel ran.
  std::string top_kernel;
  int64_t top_kernel_ns = 0;
  uint64_t top_kernel_count = 0;
};

// The durations of the whole (not clipped) steps.
Percentiles WholeStepDurations(const Breakdown& breakdown);

// The summary of diagnoses already computed: one definition for `gpuctl
// analyze` and ingest.
ProcessSummary Summarize(const Breakdown& breakdown, const TopOps& top);

// Builds the part of a gpuctl trace's model the summary reads, event by
// event as a converter writes them, and summarizes it with the same
// diagnoses (ComputeBreakdown, ComputeTopOps) `gpuctl analyze` runs on the
// stored file, so both give the same numbers. Times are any one clock's ns
// (the summary uses differences only). Not thread-safe: one converter.
class SummaryAccumulator {
 public:
  enum class OpType : uint8_t { kKernel, kMemcpy, kMemset };

  // Room for `gpu_ops` ops, when the caller knows how many will come.
  void Reserve(size_t gpu_ops) { model_.gpu_ops.reserve(gpu_ops); }
  // The capture window (a gpuctl trace's; its last steps end at its end).
  void SetWindow(int64_t start_ns, int64_t end_ns);
  // A GPU op. `name_key` is equal for equal kernel names within one
  // accumulator (a string table index); `name` is read only on a key's
  // first use. Copies' and memsets' names are not needed.
  void AddGpuOp(OpType type, uint32_t device, uint32_t stream, uint32_t name_key,
                absl::string_view name, int64_t start_ns, int64_t end_ns);
  // A "user_annotation" duration event; "ProfilerStep#N" ones are steps.
  void AddAnnotation(absl::string_view name, uint32_t tid, int64_t start_ns, int64_t end_ns);

  // Runs the diagnoses; the accumulator is spent.
  ProcessSummary Finish();

 private:
  uint32_t Intern(uint32_t name_key, absl::string_view name);
  uint32_t NameOf(absl::string_view name);

  TraceModel model_;
  absl::flat_hash_map<uint32_t, uint32_t> by_key_;
  absl::flat_hash_map<std::string, uint32_t> by_name_;
  std::vector<bool> communication_;  // by name index: an NCCL kernel
};

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_SUMMARY_H_
