#include <cmath>
#include <string>
#include <vector>

#include "daemon/analysis/event_names.h"
#include "daemon/analysis/report.h"
#include "daemon/analysis/report_communication.h"
#include "daemon/analysis/report_host_context.h"
#include "daemon/analysis/report_occupancy.h"
#include "nlohmann/json.hpp"

namespace gpuctl::analysis {
namespace {

using Json = nlohmann::json;  // keys sorted, as every --json document of gpuctl

Json Number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9e15) {
    return Json(static_cast<int64_t>(v));
  }
  return std::isfinite(v) ? Json(v) : Json(nullptr);
}

Json Times(const ClassTimes& t) {
  return Json{{"start_ns", t.start_ns},
              {"end_ns", t.end_ns},
              {"span_ns", t.span_ns()},
              {"compute_ns", t.compute_ns},
              {"communication_ns", t.communication_ns},
              {"memory_ns", t.memory_ns},
              {"idle_ns", t.idle_ns}};
}

Json Pct(const Percentiles& p) {
  return Json{{"count", p.count}, {"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"max", p.max}};
}

Json Named(const std::vector<NamedTime>& named) {
  Json out = Json::array();
  for (const NamedTime& n : named)
    out.push_back(Json{{"name", n.name}, {"ns", n.ns}, {"count", n.count}});
  return out;
}

Json Devices(const Breakdown& b) {
  Json devices = Json::array();
  for (const DeviceTimes& d : b.devices) {
    Json streams = Json::array();
    for (const StreamTimes& s : d.streams) {
      Json stream = Times(s.times);
      stream["stream"] = s.stream;
      stream["ops"] = s.ops;
      streams.push_back(std::move(stream));
    }
    Json device = Times(d.times);
    device["device"] = d.device;
    device["communication_overlapped_ns"] = d.communication_overlapped_ns;
    device["streams"] = std::move(streams);
    devices.push_back(std::move(device));
  }
  return devices;
}

Json Steps(const TraceReport& r) {
  Json steps = Json::array();
  for (size_t i = 0; i < r.breakdown.steps.size(); ++i) {
    const StepTimes& s = r.breakdown.steps[i];
    steps.push_back(Json{{"step", s.number},
                         {"start_ns", s.start_ns},
                         {"end_ns", s.end_ns},
                         {"duration_ns", s.end_ns - s.start_ns},
                         {"clipped", s.clipped},
                         {"compute_ns", s.compute_ns},
                         {"communication_ns", s.communication_ns},
                         {"memory_ns", s.memory_ns},
                         {"idle_ns", s.idle_ns},
                         {"sync_host_ns", r.sync.per_step_ns[i]}});
  }
  return steps;
}

Json Gaps(const IdleGaps& g) {
  Json out = Json::object();
  for (int c = 0; c < kGapClasses; ++c) {
    const GapTotals& t = g.classes[c];
    out[GapClassName(static_cast<GapClass>(c))] = Json{
        {"count", t.count}, {"stream_idle_ns", t.stream_idle_ns}, {"gpu_idle_ns", t.gpu_idle_ns}};
  }
  out["host_bound_ranges"] = Named(g.host_bound_ranges);
  out["before_small_kernel_gpu_idle_ns"] = g.before_small_kernel_gpu_idle_ns;
  return out;
}

Json Launch(const LaunchStats& l) {
  return Json{{"kernels", l.kernels},
              {"small_kernels", l.small_kernels},
              {"kernel_ns", l.kernel_ns},
              {"small_kernel_ns", l.small_kernel_ns},
              {"kernel_launch_calls", l.kernel_launch_calls},
              {"graph_launch_calls", l.graph_launch_calls},
              {"graph_kernels", l.graph_kernels},
              {"launch_delay_ns", Pct(l.launch_delay_ns)},
              {"kernels_per_step", Pct(l.kernels_per_step)}};
}

Json Copies(const CopyStats& c) {
  Json directions = Json::object();
  for (int d = 0; d < kCopyDirections; ++d) {
    const CopyDirectionStats& s = c.directions[d];
    if (s.count == 0) continue;
    directions[std::string(CopyDirectionName(static_cast<CopyDirection>(d)))] = Json{
        {"count", s.count}, {"bytes", s.bytes}, {"gpu_ns", s.busy_ns}, {"gbps", Number(s.gbps())}};
  }
  return Json{{"directions", std::move(directions)},
              {"memsets", c.memsets},
              {"sync_copies", c.sync_copies},
              {"sync_copy_host_ns", c.sync_copy_host_ns},
              {"pageable_async_copies", c.pageable_async_copies},
              {"pageable_async_bytes", c.pageable_async_bytes},
              {"pageable_async_ns", c.pageable_async_ns}};
}

Json Timeline(const BusyTimeline& t) {
  return Json{{"start_ns", t.start_ns},
              {"end_ns", t.end_ns},
              {"bucket_ns", t.bucket_ns},
              {"busy_ns", t.busy_ns}};
}

Json OpRows(const std::vector<OpTotals>& rows) {
  Json out = Json::array();
  for (const OpTotals& t : rows) {
    out.push_back(Json{{"name", t.name},
                       {"count", t.count},
                       {"total_ns", t.total_ns},
                       {"max_ns", t.max_ns},
                       {"bytes", t.bytes}});
  }
  return out;
}

Json Summary(const ProcessSummary& s) {
  return Json{{"gpu_span_ns", s.gpu_span_ns},
              {"compute_ns", s.compute_ns},
              {"communication_ns", s.communication_ns},
              {"memory_ns", s.memory_ns},
              {"busy_ns", s.busy_ns()},
              {"idle_ns", s.idle_ns},
              {"steps", s.steps},
              {"step_p50_ns", s.step_p50_ns},
              {"step_p99_ns", s.step_p99_ns},
              {"top_kernel", s.top_kernel},
              {"top_kernel_ns", s.top_kernel_ns},
              {"top_kernel_count", s.top_kernel_count}};
}

// The kTopOps deepest streams.
Json LaunchQueues(const LaunchQueueStats& q) {
  Json streams = Json::array();
  for (size_t i = 0; i < q.streams.size() && i < kTopOps; ++i) {
    const StreamQueue& s = q.streams[i];
    streams.push_back(Json{{"device", s.device},
                           {"stream", s.stream},
                           {"depth", Pct(s.depth)},
                           {"full_launches", s.full_launches},
                           {"full_launch_host_ns", s.full_launch_host_ns}});
  }
  return Json{{"streams", std::move(streams)}};
}

Json Trace(const TraceReport& r) {
  const TraceInfo& i = r.info;
  Json window = nullptr;
  if (i.has_window) window = Json{{"start_ns", i.window_start_ns}, {"end_ns", i.window_end_ns}};
  return Json{{"file", i.path},
              {"format", i.format == TraceFormat::kGpuctl ? "gpuctl" : "kineto"},
              {"gzip", i.gzip},
              {"trace_id", i.trace_id},
              {"host", i.host},
              {"pid", i.pid},
              {"rank", i.rank},
              {"world_size", i.world_size},
              {"base_time_ns", i.base_time_ns},
              {"window", std::move(window)},
              {"events", i.events},
              {"skipped_events", i.skipped_events},
              {"gpu_ops", r.gpu_ops},
              {"api_calls", r.api_calls},
              {"sync_records", r.syncs},
              {"ranges", r.ranges},
              {"gpu", Times(r.breakdown.process)},
              {"devices", Devices(r.breakdown)},
              {"steps", Steps(r)},
              {"timeline", Timeline(r.breakdown.timeline)},
              {"top", Json{{"kernels", OpRows(r.top.kernels)}, {"copies", OpRows(r.top.copies)}}},
              {"step_ns", Pct(r.step_ns)},
              {"summary", Summary(r.summary)},
              {"idle_gaps", Gaps(r.gaps)},
              {"host_context", HostContextJson(r.host)},
              {"launch", Launch(r.launch)},
              {"copies", Copies(r.copies)},
              {"device_memory", DeviceMemoryJson(r.memory)},
              {"communication", CommunicationJson(r.communication)},
              {"occupancy", OccupancyJson(r.occupancy)},
              {"launch_queue", LaunchQueues(r.launch_queue)},
              {"sync", Json{{"calls", r.sync.calls},
                            {"host_ns", r.sync.host_ns},
                            {"call_sites", Named(r.sync.call_sites)},
                            {"calls_by_name", Named(r.sync.by_call)}}}};
}

Json FindingJson(const Finding& f) {
  Json numbers = Json::object();
  for (const auto& [name, value] : f.numbers) numbers[name] = Number(value);
  return Json{{"id", f.id},
              {"trace", f.trace},
              {"rank", f.rank},
              {"data_quality", f.data_quality},
              {"low_confidence", f.low_confidence},
              {"recoverable_ns", f.recoverable_ns},
              {"title", f.title},
              {"advice", f.advice},
              {"numbers", std::move(numbers)},
              {"at", f.at.empty() ? Json(nullptr)
                                  : Json{{"start_ns", f.at.start_ns}, {"end_ns", f.at.end_ns}}}};
}

}  // namespace

std::string RenderJson(const std::vector<TraceReport>& reports,
                       const std::vector<Finding>& findings, const std::vector<TraceError>& errors,
                       const AnalyzeOptions& options) {
  Json doc;
  doc["schema"] = "gpuctl.analyze/1";
  doc["options"] = Json{{"small_kernel_ns", options.small_kernel_ns},
                        {"small_kernel_share", options.small_kernel_share},
                        {"min_kernels", options.min_kernels},
                        {"launch_gap_ns", options.launch_gap_ns},
                        {"min_share", options.min_share},
                        {"exposed_comm_share", options.exposed_comm_share},
                        {"link_gbps", options.link_gbps},
                        {"copy_bandwidth_share", options.copy_bandwidth_share},
                        {"memory_peak_share", options.memory_peak_share},
                        {"straggler_mad", options.straggler_mad},
                        {"straggler_share", options.straggler_share},
                        {"comm_wait_share", options.comm_wait_share},
                        {"occupancy_share", options.occupancy_share},
                        {"launch_queue_limit", options.launch_queue_limit}};
  Json traces = Json::array();
  for (const TraceReport& r : reports) traces.push_back(Trace(r));
  doc["traces"] = std::move(traces);
  Json ranked = Json::array();
  for (const Finding& f : findings) ranked.push_back(FindingJson(f));
  doc["findings"] = std::move(ranked);
  Json failed = Json::array();
  for (const TraceError& e : errors)
    failed.push_back(Json{{"file", e.file}, {"message", e.message}});
  doc["errors"] = std::move(failed);
  // Names come from the trace: invalid UTF-8 is replaced, not thrown on.
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace gpuctl::analysis
