#include "daemon/analysis/occupancy.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/analysis/units.h"

namespace gpuctl::analysis {
namespace {

// Duration-weighted sums; the percentages are taken at the end.
struct Weighted {
  double sm_ns = 0;          // duration x min(blocks per SM, 1)
  int64_t sm_weight_ns = 0;  // durations with blocks per SM
  double occupancy_ns = 0;   // duration x occupancy %
  int64_t occupancy_weight_ns = 0;

  void Add(const KernelLaunch& l, int64_t dur) {
    if (l.blocks_per_sm >= 0) {
      sm_ns += static_cast<double>(dur) * std::min(1.0, static_cast<double>(l.blocks_per_sm));
      sm_weight_ns += dur;
    }
    if (l.occupancy_pct >= 0) {
      occupancy_ns += static_cast<double>(dur) * l.occupancy_pct;
      occupancy_weight_ns += dur;
    }
  }
  double OccupancyPct() const {
    return occupancy_weight_ns > 0 ? occupancy_ns / static_cast<double>(occupancy_weight_ns) : -1;
  }
};

int64_t UnionLength(std::vector<std::pair<int64_t, int64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  int64_t total = 0, end = INT64_MIN;
  for (const auto& [s, e] : intervals) {
    const int64_t from = std::max(s, end);
    if (e > from) total += e - from;
    end = std::max(end, e);
  }
  return total;
}

DeviceOccupancy DeviceTotals(int32_t device, const Weighted& w,
                             std::vector<std::pair<int64_t, int64_t>> intervals) {
  DeviceOccupancy d;
  d.device = device;
  d.kernels = intervals.size();
  d.kernel_ns = w.sm_weight_ns;
  d.busy_ns = UnionLength(std::move(intervals));
  // Concurrent kernels can sum past the busy time: capped, as kineto does.
  if (d.busy_ns > 0) {
    d.sm_efficiency_pct = std::min(100.0, 100 * w.sm_ns / static_cast<double>(d.busy_ns));
  }
  d.occupancy_pct = w.OccupancyPct();
  return d;
}

}  // namespace

OccupancyStats ComputeOccupancy(const TraceModel& model) {
  OccupancyStats stats;
  absl::flat_hash_map<uint32_t, size_t> row_of;  // name -> kernels_by_time index
  std::vector<Weighted> row_weights;
  std::vector<int64_t> longest_ns;
  // gpu_ops are sorted by device first: one device's kernels are adjacent.
  Weighted device_weights;
  std::vector<std::pair<int64_t, int64_t>> device_intervals;
  int32_t device = 0;
  auto flush_device = [&] {
    if (device_intervals.empty() && device_weights.occupancy_weight_ns == 0) return;
    stats.devices.push_back(DeviceTotals(device, device_weights, std::move(device_intervals)));
    device_intervals.clear();
    device_weights = Weighted{};
  };
  for (const GpuOp& op : model.gpu_ops) {
    if (op.kind != GpuOpKind::kKernel && op.kind != GpuOpKind::kCommKernel) continue;
    ++stats.kernels;
    // A grid alone (kineto without device properties) gives no figure.
    if (op.launch == kNoLaunch || op.launch >= model.launches.size() ||
        (model.launches[op.launch].blocks_per_sm < 0 &&
         model.launches[op.launch].occupancy_pct < 0)) {
      ++stats.kernels_without_args;
      continue;
    }
    if (op.device != device) flush_device();
    device = op.device;
    const KernelLaunch& l = model.launches[op.launch];
    const int64_t dur = op.end_ns - op.start_ns;
    device_weights.Add(l, dur);
    if (l.blocks_per_sm >= 0) device_intervals.emplace_back(op.start_ns, op.end_ns);

    auto [it, inserted] = row_of.try_emplace(op.name, stats.kernels_by_time.size());
    if (inserted) {
      KernelOccupancy row;
      row.name = model.Name(op.name);
      row.communication = op.kind == GpuOpKind::kCommKernel;
      stats.kernels_by_time.push_back(std::move(row));
      row_weights.emplace_back();
      longest_ns.push_back(-1);
    }
    KernelOccupancy& row = stats.kernels_by_time[it->second];
    ++row.count;
    row.total_ns += dur;
    row_weights[it->second].Add(l, dur);
    if (l.blocks_per_sm >= 0 && l.blocks_per_sm < 1) {
      row.sm_idle_ns += static_cast<int64_t>(static_cast<double>(dur) * (1.0 - l.blocks_per_sm));
    }
    if (dur > longest_ns[it->second]) {
      longest_ns[it->second] = dur;
      row.longest = l;
    }
  }
  flush_device();
  for (size_t i = 0; i < stats.kernels_by_time.size(); ++i) {
    const Weighted& w = row_weights[i];
    KernelOccupancy& row = stats.kernels_by_time[i];
    if (w.sm_weight_ns > 0) {
      row.sm_efficiency_pct = 100 * w.sm_ns / static_cast<double>(w.sm_weight_ns);
    }
    row.occupancy_pct = w.OccupancyPct();
  }
  std::sort(stats.kernels_by_time.begin(), stats.kernels_by_time.end(),
            [](const KernelOccupancy& a, const KernelOccupancy& b) {
              return std::tie(b.total_ns, a.name) < std::tie(a.total_ns, b.name);
            });
  return stats;
}

namespace {

Finding OccupancyFinding(const TraceModel& model, absl::string_view id, int64_t recoverable) {
  Finding f;
  f.id = std::string(id);
  f.trace = model.info.path;
  f.rank = model.info.rank;
  f.recoverable_ns = recoverable;
  return f;
}

bool Enough(int64_t ns, int64_t span, const AnalyzeOptions& options) {
  return ns > 0 && static_cast<double>(ns) >= options.min_share * static_cast<double>(span);
}

std::string LaunchShape(const KernelLaunch& l) {
  return absl::StrCat("grid ", l.grid_blocks, " blocks x ", l.block_threads, " threads, ",
                      l.registers_per_thread, " registers/thread, ",
                      FormatBytes(l.shared_memory_bytes), " shared");
}

}  // namespace

std::vector<Finding> OccupancyFindings(const TraceModel& model, const Breakdown& breakdown,
                                       const OccupancyStats& stats, const AnalyzeOptions& options) {
  std::vector<Finding> out;
  const int64_t span = breakdown.process.span_ns();
  int64_t idle_ns = 0, small_ns = 0;
  const KernelOccupancy* top_small = nullptr;
  int64_t low_recoverable = 0, low_ns = 0;
  const KernelOccupancy* top_low = nullptr;
  for (const KernelOccupancy& k : stats.kernels_by_time) {
    if (k.communication) continue;
    if (k.sm_idle_ns > 0) {
      idle_ns += k.sm_idle_ns;
      small_ns += k.total_ns;
      if (top_small == nullptr || k.sm_idle_ns > top_small->sm_idle_ns) top_small = &k;
    }
    const double threshold = 100 * options.occupancy_share;
    // Under one block per SM the grid, not the occupancy, is the limit.
    if (k.occupancy_pct >= 0 && k.occupancy_pct < threshold && k.sm_idle_ns == 0 &&
        Enough(k.total_ns, span, options)) {
      // If its time fell with occupancy up to the threshold: an upper bound
      // (memory-bound kernels gain less).
      low_recoverable +=
          static_cast<int64_t>(static_cast<double>(k.total_ns) * (1 - k.occupancy_pct / threshold));
      low_ns += k.total_ns;
      if (top_low == nullptr) top_low = &k;  // the longest: names are by time
    }
  }
  if (top_small != nullptr && Enough(idle_ns, span, options)) {
    Finding f = OccupancyFinding(model, "small_grids", idle_ns);
    f.title = absl::StrCat("Kernels with fewer blocks than SMs left ", FormatNs(idle_ns),
                           " of SM time idle over ", FormatNs(small_ns), " of their GPU time");
    f.advice = absl::StrCat(
        "Most in '", top_small->name, "' (", FormatNs(top_small->total_ns), ", ",
        absl::StrFormat("%.2f", top_small->longest.blocks_per_sm), " blocks per SM, ",
        LaunchShape(top_small->longest),
        "): larger batches per launch, fusing, or more blocks (split-K) fill the idle SMs");
    f.numbers = {{"sm_idle_ns", static_cast<double>(idle_ns)},
                 {"kernel_ns", static_cast<double>(small_ns)},
                 {"top_blocks_per_sm", top_small->longest.blocks_per_sm},
                 {"top_sm_idle_ns", static_cast<double>(top_small->sm_idle_ns)}};
    out.push_back(std::move(f));
  }
  if (top_low != nullptr && Enough(low_recoverable, span, options)) {
    Finding f = OccupancyFinding(model, "low_occupancy", low_recoverable);
    f.title =
        absl::StrCat("Kernels ran ", FormatNs(low_ns), " under ",
                     absl::StrFormat("%.0f%%", 100 * options.occupancy_share),
                     " estimated occupancy; '", top_low->name, "' ", FormatNs(top_low->total_ns),
                     " at ", absl::StrFormat("%.0f%%", top_low->occupancy_pct));
    f.advice = absl::StrCat(
        "Its ", LaunchShape(top_low->longest),
        " limit the warps per SM: fewer registers (__launch_bounds__, -maxrregcount) or "
        "smaller tiles raise occupancy; recoverable is an upper bound");
    f.numbers = {{"kernel_ns", static_cast<double>(low_ns)},
                 {"top_occupancy_pct", top_low->occupancy_pct},
                 {"top_kernel_ns", static_cast<double>(top_low->total_ns)},
                 {"top_registers_per_thread", top_low->longest.registers_per_thread},
                 {"top_block_threads", top_low->longest.block_threads}};
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace gpuctl::analysis
