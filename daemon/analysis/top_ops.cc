#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/analysis/diagnoses.h"

namespace gpuctl::analysis {
namespace {

// `by_name` by total time, largest first (ties by name), at most `limit`.
std::vector<OpTotals> TopByTotal(const absl::flat_hash_map<uint32_t, OpTotals>& by_name,
                                 size_t limit = kTopOps) {
  std::vector<OpTotals> out;
  out.reserve(by_name.size());
  for (const auto& [name, totals] : by_name) out.push_back(totals);
  std::sort(out.begin(), out.end(), [](const OpTotals& a, const OpTotals& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  if (out.size() > limit) out.resize(limit);
  return out;
}

}  // namespace

TopOps ComputeTopOps(const TraceModel& model) {
  // One entry per distinct name: bounded by the model's name table, not by
  // the number of ops.
  absl::flat_hash_map<uint32_t, OpTotals> kernels, copies;
  for (const GpuOp& op : model.gpu_ops) {
    const bool kernel = op.kind == GpuOpKind::kKernel || op.kind == GpuOpKind::kCommKernel;
    OpTotals& t = (kernel ? kernels : copies)[op.name];
    if (t.count == 0) t.name = model.Name(op.name);
    const int64_t ns = op.end_ns - op.start_ns;
    ++t.count;
    t.total_ns += ns;
    t.max_ns = std::max(t.max_ns, ns);
    t.bytes += op.bytes;
  }
  TopOps out;
  out.all_kernels = TopByTotal(kernels, kernels.size());
  out.kernels.assign(out.all_kernels.begin(),
                     out.all_kernels.begin() +
                         static_cast<std::ptrdiff_t>(std::min(kTopOps, out.all_kernels.size())));
  out.copies = TopByTotal(copies);
  return out;
}

}  // namespace gpuctl::analysis
