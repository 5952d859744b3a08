#include "daemon/analysis/summary.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "daemon/analysis/event_names.h"

namespace gpuctl::analysis {

Percentiles WholeStepDurations(const Breakdown& breakdown) {
  std::vector<int64_t> steps;
  steps.reserve(breakdown.steps.size());
  for (const StepTimes& s : breakdown.steps) {
    if (!s.clipped) steps.push_back(s.end_ns - s.start_ns);
  }
  return ComputePercentiles(std::move(steps));
}

ProcessSummary Summarize(const Breakdown& breakdown, const TopOps& top) {
  ProcessSummary out;
  const ClassTimes& t = breakdown.process;
  out.gpu_span_ns = t.span_ns();
  out.compute_ns = t.compute_ns;
  out.communication_ns = t.communication_ns;
  out.memory_ns = t.memory_ns;
  out.idle_ns = t.idle_ns;
  const Percentiles steps = WholeStepDurations(breakdown);
  out.steps = steps.count;
  out.step_p50_ns = steps.p50;
  out.step_p99_ns = steps.p99;
  if (!top.kernels.empty()) {
    out.top_kernel = top.kernels.front().name;
    out.top_kernel_ns = top.kernels.front().total_ns;
    out.top_kernel_count = top.kernels.front().count;
  }
  return out;
}

void SummaryAccumulator::SetWindow(int64_t start_ns, int64_t end_ns) {
  // As the reader sees a gpuctl file: its window from the `gpuctl` member.
  model_.info.format = TraceFormat::kGpuctl;
  model_.info.has_gpuctl_meta = true;
  model_.info.has_window = end_ns >= start_ns;
  model_.info.window_start_ns = start_ns;
  model_.info.window_end_ns = end_ns;
}

uint32_t SummaryAccumulator::NameOf(absl::string_view name) {
  auto [it, added] =
      by_name_.try_emplace(std::string(name), static_cast<uint32_t>(model_.names.size()));
  if (added) {
    model_.names.emplace_back(name);
    communication_.push_back(IsCommunicationKernel(name));
  }
  return it->second;
}

uint32_t SummaryAccumulator::Intern(uint32_t name_key, absl::string_view name) {
  auto [it, inserted] = by_key_.try_emplace(name_key, 0);
  // Two keys may hold one name: the reader merges ops by name.
  if (inserted) it->second = NameOf(name);
  return it->second;
}

void SummaryAccumulator::AddGpuOp(OpType type, uint32_t device, uint32_t stream, uint32_t name_key,
                                  absl::string_view name, int64_t start_ns, int64_t end_ns) {
  if (end_ns < start_ns) return;  // the reader skips a negative duration
  GpuOp op;
  op.start_ns = start_ns;
  op.end_ns = end_ns;
  op.device = static_cast<int32_t>(device);
  op.stream = stream;
  switch (type) {
    case OpType::kKernel:
      op.name = Intern(name_key, name);
      op.kind = communication_[op.name] ? GpuOpKind::kCommKernel : GpuOpKind::kKernel;
      break;
    case OpType::kMemcpy:
    case OpType::kMemset:
      // One name per kind: only the top copies table, which the summary
      // does not use, reads copies' names.
      op.name = NameOf(type == OpType::kMemcpy ? "Memcpy" : "Memset");
      op.kind = type == OpType::kMemcpy ? GpuOpKind::kMemcpy : GpuOpKind::kMemset;
      break;
  }
  model_.gpu_ops.push_back(op);
}

void SummaryAccumulator::AddAnnotation(absl::string_view name, uint32_t tid, int64_t start_ns,
                                       int64_t end_ns) {
  if (end_ns < start_ns) return;
  std::optional<int64_t> step = ParseStepName(name);
  if (!step.has_value()) return;
  model_.steps.push_back(Step{start_ns, end_ns, *step, 0, tid});
}

ProcessSummary SummaryAccumulator::Finish() {
  // The order ComputeBreakdown expects, as the reader sorts.
  std::sort(model_.gpu_ops.begin(), model_.gpu_ops.end(), [](const GpuOp& a, const GpuOp& b) {
    return std::tie(a.device, a.stream, a.start_ns, a.end_ns) <
           std::tie(b.device, b.stream, b.start_ns, b.end_ns);
  });
  std::stable_sort(model_.steps.begin(), model_.steps.end(),
                   [](const Step& a, const Step& b) { return a.start_ns < b.start_ns; });
  const Breakdown breakdown = ComputeBreakdown(model_);
  const TopOps top = ComputeTopOps(model_);
  model_ = TraceModel();
  by_key_.clear();
  by_name_.clear();
  communication_.clear();
  return Summarize(breakdown, top);
}

}  // namespace gpuctl::analysis
