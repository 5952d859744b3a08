#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/analysis/diagnoses.h"
#include "daemon/analysis/event_names.h"
#include "daemon/analysis/units.h"

namespace gpuctl::analysis {
namespace {

Finding Make(const TraceModel& model, absl::string_view id) {
  Finding f;
  f.id = std::string(id);
  f.trace = model.info.path;
  f.rank = model.info.rank;
  return f;
}

Finding DataQuality(const TraceModel& model, absl::string_view id) {
  Finding f = Make(model, id);
  f.data_quality = true;
  f.low_confidence = true;
  return f;
}

double D(int64_t v) { return static_cast<double>(v); }
double U(uint64_t v) { return static_cast<double>(v); }

// Whether `ns` is worth a finding in a process whose GPU span is `span`.
bool Significant(int64_t ns, int64_t span, const AnalyzeOptions& options) {
  return ns > 0 && static_cast<double>(ns) >= options.min_share * static_cast<double>(span);
}

bool HasActivity(const TraceInfo& info, absl::string_view name) {
  return std::find(info.activities.begin(), info.activities.end(), name) != info.activities.end();
}

}  // namespace

std::vector<Finding> DataQualityFindings(const TraceModel& model, const Breakdown& breakdown) {
  std::vector<Finding> out;
  const TraceInfo& info = model.info;
  if (info.dropped_events > 0 || info.cupti_dropped_records > 0 || info.dropped_at_cap > 0) {
    Finding f = DataQuality(model, "dropped_records");
    f.title = absl::StrCat(info.dropped_events, " records were lost (CUPTI ",
                           info.cupti_dropped_records, ", buffer cap ", info.dropped_at_cap, ")");
    f.advice = "Times below undercount: capture a shorter window or fewer activities";
    f.numbers = {{"dropped_events", U(info.dropped_events)},
                 {"cupti_dropped_records", U(info.cupti_dropped_records)},
                 {"dropped_at_cap", U(info.dropped_at_cap)}};
    out.push_back(std::move(f));
  }
  if (info.host_only) {
    Finding f = DataQuality(model, "host_only");
    f.title = absl::StrCat("No GPU activity was recorded: ",
                           info.host_only_reason.empty() ? "host only" : info.host_only_reason);
    f.advice = "GPU diagnoses skipped; `gpuctl doctor --pid PID` explains CUPTI's state";
    out.push_back(std::move(f));
  } else if (model.gpu_ops.empty()) {
    Finding f = DataQuality(model, "no_gpu_activity");
    f.title = "The trace has no kernels, copies or memsets";
    f.advice = info.format == TraceFormat::kKineto
                   ? "GPU diagnoses skipped; profile with ProfilerActivity.CUDA"
                   : "GPU diagnoses skipped; capture the kernel, memcpy and runtime activities";
    out.push_back(std::move(f));
  }
  if (info.cupti_failed) {
    Finding f = DataQuality(model, "cupti_failed");
    f.title = absl::StrCat("CUPTI failed during the window: ", info.cupti_message);
    f.advice = "GPU records stop at the failure; the GPU diagnoses cover the part before it";
    out.push_back(std::move(f));
  }
  if (!model.gpu_ops.empty()) {
    std::vector<std::string> missing;
    if (info.has_activities && !info.activities.empty()) {
      for (absl::string_view a : {"kernel", "runtime"}) {
        if (!HasActivity(info, a)) missing.emplace_back(a);
      }
    } else if (model.api_calls.empty()) {
      missing.emplace_back("runtime");
    }
    if (!missing.empty()) {
      Finding f = DataQuality(model, "activities_missing");
      f.title = absl::StrCat("Not recorded: ", absl::StrJoin(missing, ", "));
      f.advice = "Without runtime calls idle gaps stay unclassified and launch delays unknown";
      out.push_back(std::move(f));
    }
  }
  const auto clipped = std::count_if(breakdown.steps.begin(), breakdown.steps.end(),
                                     [](const StepTimes& s) { return s.clipped; });
  if (clipped > 0) {
    Finding f = DataQuality(model, "clipped_window");
    f.low_confidence = false;
    f.title = absl::StrCat(clipped, " step(s) cut by the capture window's end");
    f.advice = absl::StrCat("Step statistics use the ", breakdown.steps.size() - clipped,
                            " whole step(s)");
    f.numbers = {{"clipped_steps", D(clipped)}, {"steps", U(breakdown.steps.size())}};
    out.push_back(std::move(f));
  }
  if (info.late_start) {
    Finding f = DataQuality(model, "late_start");
    f.low_confidence = false;
    f.title = absl::StrCat("The window opened ", FormatNs(info.start_skew_ns),
                           " after the requested start, later than the daemon allows");
    f.advice =
        "It ran its full duration from then: it covers a later interval than the other "
        "ranks', so cross-rank comparisons (stragglers, arrival) are unreliable for it";
    f.numbers = {{"start_skew_ns", D(info.start_skew_ns)}};
    out.push_back(std::move(f));
  }
  if (info.joined_late) {
    Finding f = DataQuality(model, "joined_late");
    f.low_confidence = false;
    f.title = "The process attached after the request and joined the trace late";
    f.advice = "Its window is shorter than the other ranks': compare per-step numbers, not totals";
    out.push_back(std::move(f));
  }
  if (info.skipped_events > 0) {
    Finding f = DataQuality(model, "skipped_events");
    f.title = absl::StrCat(info.skipped_events, " of ", info.events,
                           " events had no usable ts/dur and were skipped");
    f.advice = "The trace was written by a tool this reader does not fully understand";
    f.numbers = {{"skipped_events", U(info.skipped_events)}, {"events", U(info.events)}};
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Finding> BreakdownFindings(const TraceModel& model, const Breakdown& breakdown,
                                       const AnalyzeOptions& options) {
  std::vector<Finding> out;
  const ClassTimes& p = breakdown.process;
  const int64_t span = p.span_ns();
  int64_t overlapped = 0;
  for (const DeviceTimes& d : breakdown.devices) overlapped += d.communication_overlapped_ns;
  if (span > 0 && SharePct(p.communication_ns, span) >= 100 * options.exposed_comm_share &&
      Significant(p.communication_ns, span, options)) {
    Finding f = Make(model, "exposed_communication");
    f.recoverable_ns = p.communication_ns;
    f.at = breakdown.longest_exposed_communication;
    f.title = absl::StrCat("NCCL kernels run alone for ", FormatNs(p.communication_ns), " (",
                           FormatShare(p.communication_ns, span), " of the GPU span)");
    f.advice =
        absl::StrCat("Overlap communication with compute (DDP bucket_cap_mb, FSDP prefetch); ",
                     FormatNs(overlapped), " already overlaps");
    f.numbers = {{"communication_exposed_ns", D(p.communication_ns)},
                 {"communication_overlapped_ns", D(overlapped)},
                 {"span_ns", D(span)}};
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Finding> IdleGapFindings(const TraceModel& model, const Breakdown& breakdown,
                                     const IdleGaps& gaps, const AnalyzeOptions& options) {
  std::vector<Finding> out;
  const int64_t span = breakdown.process.span_ns();
  auto add = [&](GapClass cls, absl::string_view id, const std::string& title, std::string advice) {
    const GapTotals& t = gaps.classes[static_cast<int>(cls)];
    if (!Significant(t.gpu_idle_ns, span, options)) return;
    Finding f = Make(model, id);
    f.recoverable_ns = t.gpu_idle_ns;
    f.title =
        absl::StrCat("GPU idle ", FormatNs(t.gpu_idle_ns), " (", FormatShare(t.gpu_idle_ns, span),
                     " of the span) ", title, " (", t.count, " gaps)");
    f.advice = std::move(advice);
    f.at = t.largest;
    f.numbers = {{"gpu_idle_ns", D(t.gpu_idle_ns)},
                 {"stream_idle_ns", D(t.stream_idle_ns)},
                 {"gaps", U(t.count)},
                 {"span_ns", D(span)}};
    out.push_back(std::move(f));
  };
  std::string where = "the host thread's own work";
  if (!gaps.host_bound_ranges.empty()) {
    const NamedTime& top = gaps.host_bound_ranges.front();
    where = absl::StrCat("'", top.name, "' (", FormatNs(top.ns), ")");
  }
  add(GapClass::kHostBound, "host_bound_idle", "waiting for the host to launch work",
      absl::StrCat("Mostly in ", where,
                   ": move that work off the launching thread (DataLoader workers, "
                   "pin_memory, prefetch) or overlap it with GPU work"));
  if (!out.empty()) {
    for (const NamedTime& r : gaps.host_bound_ranges) {
      out.back().numbers.emplace_back(absl::StrCat("range:", r.name, "_ns"), D(r.ns));
    }
  }
  add(GapClass::kSyncDrain, "sync_drain_idle", "after the host synchronized",
      "Synchronize less inside the step (.item(), .cpu(), torch.cuda.synchronize) so the "
      "queue stays full");
  add(GapClass::kOther, "other_idle", "with its next op already issued",
      "The queued op waited on something else: an event or another stream's work");
  return out;
}

std::vector<Finding> LaunchFindings(const TraceModel& model, const Breakdown& breakdown,
                                    const IdleGaps& gaps, const LaunchStats& launch,
                                    const AnalyzeOptions& options) {
  std::vector<Finding> out;
  const int64_t span = breakdown.process.span_ns();
  if (launch.kernels < options.min_kernels || launch.kernels == 0) return out;
  const double small_share = U(launch.small_kernels) / U(launch.kernels);
  const int64_t recoverable = gaps.before_small_kernel_gpu_idle_ns;
  if (small_share < options.small_kernel_share || !Significant(recoverable, span, options)) {
    return out;
  }
  Finding f = Make(model, "launch_bound");
  f.recoverable_ns = recoverable;
  f.title = absl::StrCat(
      launch.small_kernels, " of ", launch.kernels, " kernels (",
      FormatShare(static_cast<int64_t>(launch.small_kernels), static_cast<int64_t>(launch.kernels)),
      ") run under ", FormatNs(options.small_kernel_ns), ", ",
      FormatShare(launch.small_kernel_ns, launch.kernel_ns), " of kernel time");
  std::string per_step;
  if (launch.kernels_per_step.count > 0) {
    per_step = absl::StrCat(", ", launch.kernels_per_step.p50, " kernels per step");
  }
  f.advice = absl::StrCat("Launch-bound: launch delay p50 ", FormatNs(launch.launch_delay_ns.p50),
                          ", p99 ", FormatNs(launch.launch_delay_ns.p99), per_step,
                          "; CUDA graphs or torch.compile(mode=\"reduce-overhead\") could recover ",
                          FormatNs(recoverable));
  f.numbers = {{"kernels", U(launch.kernels)},
               {"small_kernels", U(launch.small_kernels)},
               {"small_kernel_time_pct", SharePct(launch.small_kernel_ns, launch.kernel_ns)},
               {"launch_delay_p50_ns", D(launch.launch_delay_ns.p50)},
               {"launch_delay_p99_ns", D(launch.launch_delay_ns.p99)},
               {"kernel_launch_calls", U(launch.kernel_launch_calls)},
               {"graph_launch_calls", U(launch.graph_launch_calls)},
               {"gpu_idle_before_small_kernels_ns", D(recoverable)}};
  if (launch.kernels_per_step.count > 0) {
    f.numbers.emplace_back("kernels_per_step_p50", D(launch.kernels_per_step.p50));
  }
  out.push_back(std::move(f));
  return out;
}

std::vector<Finding> CopyFindings(const TraceModel& model, const Breakdown& breakdown,
                                  const CopyStats& copies, const AnalyzeOptions& options) {
  std::vector<Finding> out;
  const int64_t span = breakdown.process.span_ns();
  if (Significant(copies.sync_copy_host_ns, span, options)) {
    Finding f = Make(model, "sync_copies");
    f.recoverable_ns = copies.sync_copy_host_ns;
    f.at = copies.longest_sync_copy;
    f.title = absl::StrCat(copies.sync_copies, " synchronous copies/memsets held the host for ",
                           FormatNs(copies.sync_copy_host_ns));
    f.advice =
        "Use async copies from pinned memory (tensor.to(device, non_blocking=True) after "
        "pin_memory()) so the host keeps launching";
    f.numbers = {{"sync_copies", U(copies.sync_copies)}, {"host_ns", D(copies.sync_copy_host_ns)}};
    out.push_back(std::move(f));
  }
  if (copies.pageable_async_copies > 0 && Significant(copies.pageable_async_ns, span, options)) {
    Finding f = Make(model, "pageable_copies");
    f.recoverable_ns = copies.pageable_async_ns;
    f.at = copies.longest_pageable_async;
    f.title = absl::StrCat(copies.pageable_async_copies, " async copies of pageable memory (",
                           FormatBytes(copies.pageable_async_bytes), ", ",
                           FormatNs(copies.pageable_async_ns), ") run synchronously");
    f.advice = "Pin the host buffers (DataLoader(pin_memory=True), cudaHostAlloc)";
    f.numbers = {{"copies", U(copies.pageable_async_copies)},
                 {"bytes", U(copies.pageable_async_bytes)},
                 {"gpu_ns", D(copies.pageable_async_ns)}};
    out.push_back(std::move(f));
  }
  if (options.link_gbps > 0) {
    for (CopyDirection dir : {CopyDirection::kHtoD, CopyDirection::kDtoH}) {
      const CopyDirectionStats& d = copies.directions[static_cast<int>(dir)];
      if (d.bytes == 0 || d.gbps() >= options.copy_bandwidth_share * options.link_gbps) continue;
      // bytes / (GB/s) is ns; never more than the copies took.
      const double at_link = std::min(U(d.bytes) / options.link_gbps, D(d.busy_ns));
      const int64_t recoverable = d.busy_ns - static_cast<int64_t>(at_link);
      if (!Significant(recoverable, span, options)) continue;
      Finding f = Make(model, "slow_copies");
      f.recoverable_ns = recoverable;
      f.title = absl::StrCat(
          CopyDirectionName(dir), " copies ran at ", absl::StrFormat("%.1f", d.gbps()),
          " GB/s, under ", absl::StrFormat("%.0f%%", 100 * options.copy_bandwidth_share),
          " of the link's ", absl::StrFormat("%.1f", options.link_gbps), " GB/s");
      f.advice = "Batch small copies into large ones and copy from pinned memory";
      f.numbers = {{"bytes", U(d.bytes)}, {"gpu_ns", D(d.busy_ns)}, {"gbps", d.gbps()}};
      out.push_back(std::move(f));
    }
  }
  return out;
}

std::vector<Finding> SyncFindings(const TraceModel& model, const Breakdown& breakdown,
                                  const SyncStats& syncs, const AnalyzeOptions& options) {
  std::vector<Finding> out;
  const int64_t span = breakdown.process.span_ns();
  if (!Significant(syncs.host_ns, span, options)) return out;
  Finding f = Make(model, "sync_stalls");
  f.recoverable_ns = syncs.host_ns;
  f.at = syncs.longest;
  std::vector<int64_t> whole_steps;
  for (size_t i = 0; i < breakdown.steps.size(); ++i) {
    if (!breakdown.steps[i].clipped) whole_steps.push_back(syncs.per_step_ns[i]);
  }
  Percentiles per_step = ComputePercentiles(whole_steps);
  f.title = absl::StrCat("The host waited ", FormatNs(syncs.host_ns), " in ", syncs.calls,
                         " synchronize calls");
  if (per_step.count > 0) absl::StrAppend(&f.title, " (p50 ", FormatNs(per_step.p50), "/step)");
  std::string site = "(no range)";
  if (!syncs.call_sites.empty()) {
    site = absl::StrCat("'", syncs.call_sites.front().name, "' (",
                        FormatNs(syncs.call_sites.front().ns), ")");
  }
  f.advice = absl::StrCat("Top call site ", site,
                          ": avoid syncs inside the step (.item(), .cpu(), printing tensors)");
  f.numbers = {{"calls", U(syncs.calls)}, {"host_ns", D(syncs.host_ns)}};
  if (per_step.count > 0) f.numbers.emplace_back("per_step_p50_ns", D(per_step.p50));
  for (const NamedTime& s : syncs.call_sites) {
    f.numbers.emplace_back(absl::StrCat("site:", s.name, "_ns"), D(s.ns));
  }
  out.push_back(std::move(f));
  return out;
}

}  // namespace gpuctl::analysis
