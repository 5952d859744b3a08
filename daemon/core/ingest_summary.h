#ifndef GPUCTL_DAEMON_CORE_INGEST_SUMMARY_H_
#define GPUCTL_DAEMON_CORE_INGEST_SUMMARY_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "daemon/analysis/summary.h"
#include "daemon/convert/chrome_trace.h"
#include "gpuctl/v1/manifest.pb.h"

namespace gpuctl::daemon {

// The manifest's per-process summary, computed while the converter writes
// the trace: the analysis's accumulator fed through the converter's
// observer, so the numbers are those `gpuctl analyze` gives for the stored
// file. One conversion, on its thread.
class IngestSummary final : public TraceEventObserver {
 public:
  void OnWindow(int64_t start_ns, int64_t end_ns) override;
  void OnGpuOp(GpuOpType type, uint32_t device, uint32_t stream, uint32_t name_key,
               absl::string_view name, int64_t start_ns, int64_t end_ns) override;
  void OnAnnotation(absl::string_view name, uint32_t tid, int64_t start_ns,
                    int64_t end_ns) override;

  // Room for the GPU ops to come (kernels, copies and memsets).
  void Reserve(size_t gpu_ops) { accumulator_.Reserve(gpu_ops); }
  // The summary of what was written; the observer is spent.
  v1::ProcessSummary Finish();

 private:
  analysis::SummaryAccumulator accumulator_;
};

// `s` as the manifest holds it (the kernel name repaired to UTF-8, as the
// trace file writes it).
v1::ProcessSummary SummaryProto(const analysis::ProcessSummary& s);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_INGEST_SUMMARY_H_
