#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/numeric/int128.h"
#include "daemon/analysis/diagnoses.h"

namespace gpuctl::analysis {
namespace {

// Classes in priority order; kIdle last.
enum Class : uint8_t { kCompute = 0, kComm = 1, kMemory = 2, kIdle = 3 };

Class ClassOf(const GpuOp& op) {
  switch (op.kind) {
    case GpuOpKind::kKernel:
      return kCompute;
    case GpuOpKind::kCommKernel:
      return kComm;
    case GpuOpKind::kMemcpy:
    case GpuOpKind::kMemset:
      break;
  }
  return kMemory;
}

struct Edge {
  int64_t t;
  int8_t delta;
  uint8_t cls;
};

struct Segment {
  int64_t start, end;
  Class cls;
};

struct Swept {
  ClassTimes times;
  int64_t comm_overlapped_ns = 0;
  std::vector<Segment> segments;  // every class, idle included, merged
};

void AddEdges(const GpuOp& op, std::vector<Edge>* edges) {
  const uint8_t cls = ClassOf(op);
  edges->push_back(Edge{op.start_ns, +1, cls});
  edges->push_back(Edge{op.end_ns, -1, cls});
}

bool EdgeBefore(const Edge& a, const Edge& b) { return a.t != b.t ? a.t < b.t : a.delta < b.delta; }

// Sorts `edges`, made of sorted runs starting at `runs` (ascending, the
// first 0), by merging neighbouring runs: O(n log runs).
void MergeRuns(std::vector<Edge>* edges, std::vector<size_t> runs) {
  while (runs.size() > 1) {
    std::vector<size_t> merged;
    for (size_t i = 0; i < runs.size(); i += 2) {
      merged.push_back(runs[i]);
      if (i + 1 == runs.size()) break;
      const size_t end = i + 2 < runs.size() ? runs[i + 2] : edges->size();
      std::inplace_merge(edges->begin() + static_cast<std::ptrdiff_t>(runs[i]),
                         edges->begin() + static_cast<std::ptrdiff_t>(runs[i + 1]),
                         edges->begin() + static_cast<std::ptrdiff_t>(end), EdgeBefore);
    }
    runs = std::move(merged);
  }
}

Swept Sweep(std::vector<Edge> edges) {
  Swept out;
  if (edges.empty()) return out;
  // A stream's ops mostly run one after another: their edges come sorted.
  if (!std::is_sorted(edges.begin(), edges.end(), EdgeBefore)) {
    std::sort(edges.begin(), edges.end(), EdgeBefore);
  }
  int64_t counts[3] = {0, 0, 0};
  int64_t by_class[4] = {0, 0, 0, 0};
  int64_t prev = edges.front().t;
  for (const Edge& e : edges) {
    if (e.t > prev) {
      Class cls = counts[kCompute] > 0  ? kCompute
                  : counts[kComm] > 0   ? kComm
                  : counts[kMemory] > 0 ? kMemory
                                        : kIdle;
      by_class[cls] += e.t - prev;
      if (counts[kCompute] > 0 && counts[kComm] > 0) out.comm_overlapped_ns += e.t - prev;
      if (!out.segments.empty() && out.segments.back().cls == cls &&
          out.segments.back().end == prev) {
        out.segments.back().end = e.t;
      } else {
        out.segments.push_back(Segment{prev, e.t, cls});
      }
      prev = e.t;
    }
    counts[e.cls] += e.delta;
  }
  out.times.start_ns = edges.front().t;
  out.times.end_ns = edges.back().t;
  out.times.compute_ns = by_class[kCompute];
  out.times.communication_ns = by_class[kComm];
  out.times.memory_ns = by_class[kMemory];
  out.times.idle_ns = by_class[kIdle];
  return out;
}

std::vector<StepTimes> MergeSteps(const TraceModel& model) {
  std::map<int64_t, std::pair<int64_t, int64_t>> by_number;
  for (const Step& s : model.steps) {
    auto [it, inserted] = by_number.try_emplace(s.number, s.start_ns, s.end_ns);
    if (!inserted) {
      it->second.first = std::min(it->second.first, s.start_ns);
      it->second.second = std::max(it->second.second, s.end_ns);
    }
  }
  std::vector<StepTimes> steps;
  for (const auto& [number, span] : by_number) {
    StepTimes step;
    step.number = number;
    step.start_ns = span.first;
    step.end_ns = span.second;
    // gpuctl ends the last step of a thread at the window's end.
    step.clipped = model.info.format == TraceFormat::kGpuctl && model.info.has_window &&
                   step.end_ns >= model.info.window_end_ns;
    steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end(),
            [](const StepTimes& a, const StepTimes& b) { return a.start_ns < b.start_ns; });
  return steps;
}

void FillStep(const std::vector<Segment>& segments, StepTimes* step) {
  auto it = std::partition_point(segments.begin(), segments.end(),
                                 [&](const Segment& s) { return s.end <= step->start_ns; });
  int64_t busy = 0;
  for (; it != segments.end() && it->start < step->end_ns; ++it) {
    int64_t len = std::min(it->end, step->end_ns) - std::max(it->start, step->start_ns);
    if (len <= 0) continue;
    switch (it->cls) {
      case kCompute:
        step->compute_ns += len;
        break;
      case kComm:
        step->communication_ns += len;
        break;
      case kMemory:
        step->memory_ns += len;
        break;
      case kIdle:
        continue;
    }
    busy += len;
  }
  step->idle_ns = step->end_ns - step->start_ns - busy;
}

// The longest capture window the timeline spreads over: the file says where
// its window is, and a window far longer than any event could be (the reader
// drops events further than 10^13 ns from the first) would leave every op in
// one bucket, or overflow.
constexpr int64_t kMaxTimelineWindowNs = 40'000'000'000'000;

// The busy time of `segments` (sorted, disjoint) in buckets across the
// capture window, or the GPU span when the window is unknown, empty or
// implausibly long.
BusyTimeline Timeline(const TraceModel& model, const std::vector<Segment>& segments,
                      const ClassTimes& span) {
  BusyTimeline out;
  const TraceInfo& info = model.info;
  const absl::int128 window = absl::int128(info.window_end_ns) - info.window_start_ns;
  if (info.has_window && window > 0 && window <= kMaxTimelineWindowNs) {
    out.start_ns = info.window_start_ns;
    out.end_ns = info.window_end_ns;
  } else {
    out.start_ns = span.start_ns;
    out.end_ns = span.end_ns;
  }
  const int64_t length = out.end_ns - out.start_ns;
  if (length <= 0) return out;
  out.bucket_ns = (length + kTimelineBuckets - 1) / kTimelineBuckets;
  out.busy_ns.assign(static_cast<size_t>((length + out.bucket_ns - 1) / out.bucket_ns), 0);
  for (const Segment& s : segments) {
    if (s.cls == kIdle) continue;
    int64_t a = std::max(s.start, out.start_ns);
    const int64_t b = std::min(s.end, out.end_ns);
    while (a < b) {
      const size_t i = static_cast<size_t>((a - out.start_ns) / out.bucket_ns);
      const int64_t cut = std::min(b, out.BucketEnd(i));
      out.busy_ns[i] += cut - a;
      a = cut;
    }
  }
  return out;
}

// The longest segment in which communication was the class.
TimeSpan LongestExposedCommunication(const std::vector<Segment>& segments) {
  TimeSpan out;
  for (const Segment& s : segments) {
    if (s.cls == kComm && s.end - s.start > out.end_ns - out.start_ns) out = {s.start, s.end};
  }
  return out;
}

}  // namespace

Breakdown ComputeBreakdown(const TraceModel& model) {
  Breakdown out;
  std::vector<Edge> all, device_edges, stream_edges;
  // Where each sorted run begins: a stream's in device_edges, a device's in
  // all; merged rather than sorted again.
  std::vector<size_t> stream_runs, device_runs;
  const std::vector<GpuOp>& ops = model.gpu_ops;
  for (size_t i = 0; i < ops.size();) {
    DeviceTimes device;
    device.device = ops[i].device;
    device_edges.clear();
    stream_runs.clear();
    while (i < ops.size() && ops[i].device == device.device) {
      StreamTimes stream;
      stream.stream = ops[i].stream;
      stream_edges.clear();
      for (; i < ops.size() && ops[i].device == device.device && ops[i].stream == stream.stream;
           ++i) {
        AddEdges(ops[i], &stream_edges);
        ++stream.ops;
      }
      if (!std::is_sorted(stream_edges.begin(), stream_edges.end(), EdgeBefore)) {
        std::sort(stream_edges.begin(), stream_edges.end(), EdgeBefore);
      }
      stream_runs.push_back(device_edges.size());
      device_edges.insert(device_edges.end(), stream_edges.begin(), stream_edges.end());
      stream.times = Sweep(std::move(stream_edges)).times;
      stream_edges = {};
      device.streams.push_back(stream);
    }
    MergeRuns(&device_edges, stream_runs);
    device_runs.push_back(all.size());
    all.insert(all.end(), device_edges.begin(), device_edges.end());
    Swept swept = Sweep(std::move(device_edges));
    device_edges = {};
    device.times = swept.times;
    device.communication_overlapped_ns = swept.comm_overlapped_ns;
    for (const Segment& s : swept.segments) {
      if (s.cls == kIdle) device.idle.emplace_back(s.start, s.end);
    }
    out.devices.push_back(std::move(device));
  }
  MergeRuns(&all, device_runs);
  Swept process = Sweep(std::move(all));
  out.process = process.times;
  out.steps = MergeSteps(model);
  for (StepTimes& step : out.steps) FillStep(process.segments, &step);
  out.timeline = Timeline(model, process.segments, out.process);
  out.longest_exposed_communication = LongestExposedCommunication(process.segments);
  return out;
}

}  // namespace gpuctl::analysis
