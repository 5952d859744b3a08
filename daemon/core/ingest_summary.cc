#include "daemon/core/ingest_summary.h"

#include "daemon/convert/json_writer.h"

namespace gpuctl::daemon {
namespace {

analysis::SummaryAccumulator::OpType AccumulatorType(TraceEventObserver::GpuOpType type) {
  switch (type) {
    case TraceEventObserver::GpuOpType::kKernel:
      return analysis::SummaryAccumulator::OpType::kKernel;
    case TraceEventObserver::GpuOpType::kMemcpy:
      return analysis::SummaryAccumulator::OpType::kMemcpy;
    case TraceEventObserver::GpuOpType::kMemset:
      return analysis::SummaryAccumulator::OpType::kMemset;
  }
  return analysis::SummaryAccumulator::OpType::kKernel;
}

}  // namespace

void IngestSummary::OnWindow(int64_t start_ns, int64_t end_ns) {
  accumulator_.SetWindow(start_ns, end_ns);
}

void IngestSummary::OnGpuOp(GpuOpType type, uint32_t device, uint32_t stream, uint32_t name_key,
                            absl::string_view name, int64_t start_ns, int64_t end_ns) {
  accumulator_.AddGpuOp(AccumulatorType(type), device, stream, name_key, name, start_ns, end_ns);
}

void IngestSummary::OnAnnotation(absl::string_view name, uint32_t tid, int64_t start_ns,
                                 int64_t end_ns) {
  accumulator_.AddAnnotation(name, tid, start_ns, end_ns);
}

v1::ProcessSummary IngestSummary::Finish() { return SummaryProto(accumulator_.Finish()); }

v1::ProcessSummary SummaryProto(const analysis::ProcessSummary& s) {
  v1::ProcessSummary out;
  out.set_gpu_span_ns(s.gpu_span_ns);
  out.set_compute_ns(s.compute_ns);
  out.set_communication_ns(s.communication_ns);
  out.set_memory_ns(s.memory_ns);
  out.set_idle_ns(s.idle_ns);
  out.set_steps(s.steps);
  out.set_step_p50_ns(s.step_p50_ns);
  out.set_step_p99_ns(s.step_p99_ns);
  out.set_top_kernel(RepairUtf8(s.top_kernel));
  out.set_top_kernel_ns(s.top_kernel_ns);
  out.set_top_kernel_count(s.top_kernel_count);
  return out;
}

}  // namespace gpuctl::daemon
