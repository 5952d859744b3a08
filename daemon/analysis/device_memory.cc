#include "daemon/analysis/device_memory.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "daemon/analysis/units.h"

namespace gpuctl::analysis {
namespace {

// One device's samples of one source, in time order.
using MemorySamples = absl::Span<const MemorySample>;

// The allocated bytes at `ts_ns`: the last sample at or before it. Before
// the first sample gpuctl's counter is 0 (its window-start baseline); the
// allocator's value is unknown.
std::optional<int64_t> MemoryBytesAt(MemorySamples samples, bool allocator, int64_t ts_ns) {
  auto after = std::upper_bound(samples.begin(), samples.end(), ts_ns,
                                [](int64_t t, const MemorySample& s) { return t < s.ts_ns; });
  if (after == samples.begin()) return allocator ? std::nullopt : std::optional<int64_t>(0);
  return std::prev(after)->bytes;
}

uint64_t DeviceSizeOf(const TraceModel& model, int32_t device) {
  for (const DeviceMemoryTotal& d : model.device_memory) {
    if (d.device == device) return d.bytes;
  }
  return 0;
}

void MemoryAtStepBoundaries(MemorySamples samples, const Breakdown& breakdown, DeviceMemory* d) {
  for (const StepTimes& step : breakdown.steps) {
    if (step.clipped) continue;
    std::optional<int64_t> end = MemoryBytesAt(samples, d->allocator, step.end_ns);
    if (d->step_bytes.empty()) {
      std::optional<int64_t> start = MemoryBytesAt(samples, d->allocator, step.start_ns);
      if (!start.has_value()) continue;
      d->step_bytes.push_back(*start);
    }
    d->step_bytes.push_back(*end);  // known: a sample precedes the step's start
    d->step_numbers.push_back(step.number);
  }
}

void MemoryGrowth(DeviceMemory* d) {
  const std::vector<int64_t>& b = d->step_bytes;
  const size_t steps = d->step_numbers.size();
  if (steps < kMinMemoryGrowthSteps) return;
  for (size_t i = 1; i < b.size(); ++i) {
    if (b[i] < b[i - 1]) return;
  }
  if (b.back() <= b.front()) return;
  d->growing = true;
  d->growth_bytes_per_step = static_cast<double>(b.back() - b.front()) / static_cast<double>(steps);
  if (d->total_bytes == 0) return;
  const double headroom = static_cast<double>(d->total_bytes) - static_cast<double>(b.back());
  d->steps_until_full =
      headroom <= 0 ? 0 : static_cast<int64_t>(std::ceil(headroom / d->growth_bytes_per_step));
}

DeviceMemory AnalyzeDeviceMemory(const TraceModel& model, const Breakdown& breakdown,
                                 MemorySamples samples, bool allocator) {
  DeviceMemory d;
  d.device = samples.front().device;
  d.allocator = allocator;
  d.samples = samples.size();
  d.total_bytes = DeviceSizeOf(model, d.device);
  d.peak_bytes = samples.front().bytes;
  d.peak_ts_ns = samples.front().ts_ns;
  for (const MemorySample& s : samples) {
    if (s.bytes > d.peak_bytes) {
      d.peak_bytes = s.bytes;
      d.peak_ts_ns = s.ts_ns;
    }
    if (s.reserved > d.peak_reserved_bytes) {
      d.peak_reserved_bytes = s.reserved;
      d.peak_reserved_ts_ns = s.ts_ns;
    }
  }
  d.last_bytes = samples.back().bytes;
  MemoryAtStepBoundaries(samples, breakdown, &d);
  MemoryGrowth(&d);
  return d;
}

std::string FormatGib(double bytes) { return absl::StrFormat("%.2f GiB", bytes / (1u << 30)); }
std::string FormatMib(double bytes) { return absl::StrFormat("%.1f MiB", bytes / (1u << 20)); }

// What the numbers are, for the advice.
const char* MemorySourceNote(const DeviceMemory& d) {
  if (d.allocator && d.peak_reserved_bytes >= 0) {
    return "PyTorch's caching allocator's: reserved is what it holds of the device, allocated "
           "what live tensors use";
  }
  return d.allocator ? "PyTorch's allocated bytes (its cache comes on top)"
                     : "CUDA allocations since the window began (with PyTorch's caching "
                       "allocator: memory it reserved, not live tensors)";
}

Finding MemoryGrowthFinding(const TraceModel& model, const DeviceMemory& d) {
  Finding f;
  f.id = "memory_growth";
  f.title = absl::StrCat("GPU ", d.device, " memory grew ", FormatMib(d.growth_bytes_per_step),
                         " per step over ", d.step_numbers.size(), " steps");
  std::string full = d.steps_until_full >= 0
                         ? absl::StrCat("; full in ", d.allocator ? "" : "at most ",
                                        d.steps_until_full, " steps at this rate")
                         : "";
  f.advice = absl::StrCat(
      "look for tensors kept across steps (losses summed without .item(), "
      "growing caches or lists, retain_graph)",
      full, "; the numbers are ", MemorySourceNote(d));
  f.numbers = {{"device", d.device},
               {"steps", static_cast<double>(d.step_numbers.size())},
               {"growth_bytes_per_step", d.growth_bytes_per_step},
               {"first_step_bytes", static_cast<double>(d.step_bytes.front())},
               {"last_step_bytes", static_cast<double>(d.step_bytes.back())},
               {"steps_until_full", static_cast<double>(d.steps_until_full)}};
  if (d.total_bytes > 0) f.numbers.emplace_back("total_bytes", static_cast<double>(d.total_bytes));
  f.trace = model.info.path;
  f.rank = model.info.rank;
  return f;
}

Finding MemoryPeakFinding(const TraceModel& model, const DeviceMemory& d) {
  const int64_t held = d.held_peak_bytes();
  const double pct = 100.0 * static_cast<double>(held) / static_cast<double>(d.total_bytes);
  Finding f;
  f.id = "memory_peak";
  const std::string what =
      d.peak_reserved_bytes >= 0
          ? absl::StrCat(FormatGib(static_cast<double>(d.peak_reserved_bytes)),
                         " reserved by PyTorch (", FormatGib(static_cast<double>(d.peak_bytes)),
                         " allocated)")
          : FormatGib(static_cast<double>(d.peak_bytes));
  f.title = absl::StrFormat("GPU %d memory peaked at %s, %.1f%% of its %s", d.device, what, pct,
                            FormatGib(static_cast<double>(d.total_bytes)));
  f.advice = absl::StrCat(
      "little headroom: a larger batch or fragmentation ends in out-of-memory; activation "
      "checkpointing, a smaller batch with gradient accumulation or "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True give some back; the numbers are ",
      MemorySourceNote(d), d.allocator ? "" : ", so the real peak is at least this");
  f.numbers = {{"device", d.device},
               {"peak_bytes", static_cast<double>(d.peak_bytes)},
               {"total_bytes", static_cast<double>(d.total_bytes)},
               {"peak_pct", pct}};
  if (d.peak_reserved_bytes >= 0) {
    f.numbers.emplace_back("peak_reserved_bytes", static_cast<double>(d.peak_reserved_bytes));
  }
  f.at = TimeSpan{d.held_peak_ts_ns(), d.held_peak_ts_ns() + 1};
  f.trace = model.info.path;
  f.rank = model.info.rank;
  return f;
}

}  // namespace

DeviceMemoryStats ComputeDeviceMemory(const TraceModel& model, const Breakdown& breakdown) {
  DeviceMemoryStats stats;
  MemorySamples all(model.memory);
  // Sorted by (device, allocator, ts): per device the CUPTI run, then the
  // allocator's; the allocator's absolute view wins when both are there.
  for (size_t i = 0; i < all.size();) {
    size_t end = i;
    while (end < all.size() && all[end].device == all[i].device) ++end;
    size_t split = i;
    while (split < end && !all[split].allocator) ++split;
    const bool allocator = split < end;
    MemorySamples run = allocator ? all.subspan(split, end - split) : all.subspan(i, end - i);
    stats.devices.push_back(AnalyzeDeviceMemory(model, breakdown, run, allocator));
    i = end;
  }
  return stats;
}

std::vector<Finding> DeviceMemoryFindings(const TraceModel& model, const DeviceMemoryStats& memory,
                                          const AnalyzeOptions& options) {
  std::vector<Finding> out;
  for (const DeviceMemory& d : memory.devices) {
    if (d.growing) out.push_back(MemoryGrowthFinding(model, d));
    if (d.total_bytes > 0 && d.held_peak_bytes() > 0 &&
        static_cast<double>(d.held_peak_bytes()) >=
            options.memory_peak_share * static_cast<double>(d.total_bytes)) {
      out.push_back(MemoryPeakFinding(model, d));
    }
  }
  return out;
}

nlohmann::json DeviceMemoryJson(const DeviceMemoryStats& memory) {
  nlohmann::json out = nlohmann::json::array();
  for (const DeviceMemory& d : memory.devices) {
    out.push_back(
        {{"device", d.device},
         {"source", d.allocator ? "allocator" : "cupti"},
         {"samples", d.samples},
         {"total_bytes", d.total_bytes},
         {"peak_bytes", d.peak_bytes},
         {"peak_ns", d.peak_ts_ns},
         {"peak_reserved_bytes", d.peak_reserved_bytes >= 0 ? nlohmann::json(d.peak_reserved_bytes)
                                                            : nlohmann::json(nullptr)},
         {"last_bytes", d.last_bytes},
         {"step_numbers", d.step_numbers},
         {"step_bytes", d.step_bytes},
         {"growing", d.growing},
         {"growth_bytes_per_step", d.growth_bytes_per_step},
         {"steps_until_full", d.steps_until_full}});
  }
  return out;
}

}  // namespace gpuctl::analysis
