// The GPU part of the Chrome trace: kineto's layout for CUPTI activity
// (libkineto/src/output_json.cpp, CuptiActivity.h). docs/trace-format.md
// lists every field.
#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "daemon/convert/chrome_trace_internal.h"
#include "daemon/convert/correlation_map.h"
#include "daemon/convert/cupti_names.h"
#include "daemon/convert/kernel_occupancy.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::daemon::chrome_internal {
namespace {

namespace rec = ::gpuctl::records;

// `v` as printf's "%.6f" writes it (std::to_chars gives the same digits
// without printf's format parsing and locale).
void AppendFixed6(std::string* out, double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed, 6);
  if (ec != std::errc()) {
    absl::StrAppendFormat(out, "%.6f", v);  // beyond 64 characters: > 1e56
    return;
  }
  out->append(buf, static_cast<size_t>(end - buf));
}

// The smallest and largest nonzero correlation id of the API calls (every
// GPU op's id is one of them); lo > hi when there is none.
struct CorrelationSpan {
  uint32_t lo = 1;
  uint32_t hi = 0;
};
CorrelationSpan ApiCorrelationSpan(const DecodedRecords& r) {
  CorrelationSpan span{std::numeric_limits<uint32_t>::max(), 0};
  for (const ApiCallRecord& call : r.api_calls) {
    if (call.correlation_id == 0) continue;
    span.lo = std::min(span.lo, call.correlation_id);
    span.hi = std::max(span.hi, call.correlation_id);
  }
  return span.hi == 0 ? CorrelationSpan{} : span;
}

// CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE.
constexpr uint32_t kStreamSyncType = 3;
// Kineto's tid offset of a stream's synchronize row.
constexpr int64_t kSyncRowOffset = 1000000;

// A GPU row: pid = device id, tid = stream id.
struct Row {
  int64_t pid;
  int64_t tid;
};

class GpuEventWriter {
 public:
  GpuEventWriter(const DecodedRecords& r, int64_t pid, EventWriter* events)
      : r_(r),
        pid_(pid),
        ev_(events),
        observer_(events->observer()),
        out_(events->out()),
        span_(ApiCorrelationSpan(r)),
        launch_(span_.lo, span_.hi, r.api_calls.size()),
        external_(span_.lo, span_.hi, r.api_calls.size()),
        gpu_correlations_(span_.lo, span_.hi, r.api_calls.size()) {}

  void Write() {
    Index();
    WriteMetadata();
    for (size_t i = 0; i < r_.api_calls.size(); ++i) WriteApiCall(i);
    for (const MarkerRecord& m : r_.markers) WriteMarker(m);
    for (const KernelRecord& k : r_.kernels) WriteKernel(k);
    for (const MemcpyRecord& m : r_.memcpys) WriteMemcpy(m);
    for (const MemsetRecord& m : r_.memsets) WriteMemset(m);
    for (const SyncRecord& s : r_.syncs) WriteSync(s);
    for (const OverheadRecord& o : r_.overheads) WriteOverhead(o);
    WriteMemoryEvents(r_, ev_);
  }

 private:
  void NoteGpuOp(uint32_t device, uint32_t context, uint32_t stream, uint32_t correlation) {
    context_device_.emplace(context, device);
    streams_[device].insert(stream);
    if (correlation != 0) gpu_correlations_.Emplace(correlation, 1);
  }

  void Index() {
    for (size_t i = 0; i < r_.api_calls.size(); ++i) {
      const ApiCallRecord& call = r_.api_calls[i];
      if (call.correlation_id == 0) continue;
      auto [launch, inserted] = launch_.Emplace(call.correlation_id, i);
      // A runtime call is the launch the user wrote; prefer it to the
      // driver call beneath it.
      if (!inserted && call.domain == rec::kApiDomainRuntime &&
          r_.api_calls[*launch].domain != rec::kApiDomainRuntime) {
        *launch = i;
      }
    }
    for (const ExternalCorrelationRecord& e : r_.external_correlations) {
      if (e.external_kind == rec::kExternalKindGpuctlRange && e.correlation_id != 0) {
        external_.Emplace(e.correlation_id, e.external_id);
      }
    }
    for (const DeviceInfoRecord& d : r_.device_infos) {
      devices_.emplace(d.device_id, &d);
      streams_[d.device_id];
    }
    // A device with memory records only still gets its named GPU row.
    for (const MemoryRecord& m : r_.memory_ops) streams_[m.device_id];
    for (const MemoryPoolRecord& p : r_.memory_pools) streams_[p.device_id];
    for (const KernelRecord& k : r_.kernels) {
      NoteGpuOp(k.device_id, k.context_id, k.stream_id, k.correlation_id);
    }
    for (const MemcpyRecord& m : r_.memcpys) {
      NoteGpuOp(m.device_id, m.context_id, m.stream_id, m.correlation_id);
    }
    for (const MemsetRecord& m : r_.memsets) {
      NoteGpuOp(m.device_id, m.context_id, m.stream_id, m.correlation_id);
    }
    // Synchronizations carry a context, not a device: they land on the
    // device that context's GPU ops ran on.
    for (const SyncRecord& s : r_.syncs) {
      auto it = context_device_.find(s.context_id);
      if (it != context_device_.end()) {
        if (IsStreamSync(s)) {
          sync_rows_[it->second].insert(SyncStream(s));
        } else {
          streams_[it->second].insert(SyncStream(s));
        }
      }
      if (s.correlation_id != 0) gpu_correlations_.Emplace(s.correlation_id, 1);
    }
  }

  // CUPTI's stream id as kineto writes it: signed, -1 when none applies.
  static int64_t SyncStream(const SyncRecord& s) { return static_cast<int32_t>(s.stream_id); }
  static bool IsStreamSync(const SyncRecord& s) {
    return s.type == kStreamSyncType && SyncStream(s) >= 0;
  }
  // The GPU row's tid: a stream synchronize on kineto's row of its own
  // beside the stream (output_json.cpp, kSyncStreamTidOffset), so it does
  // not cover the kernels it waits for; the others on their stream's row.
  static int64_t SyncTid(const SyncRecord& s) {
    return IsStreamSync(s) ? SyncStream(s) + kSyncRowOffset : SyncStream(s);
  }

  void WriteMetadata() {
    for (const auto& [device, streams] : streams_) {
      std::string name = absl::StrCat("GPU ", device);
      ev_->Meta("process_name", device, 0, "name", name);
      ev_->Meta("process_labels", device, 0, "labels", name);
      ev_->MetaIndex("process_sort_index", device, 0, kGpuSortIndexBase + device);
      for (int64_t stream : streams) {
        ev_->Meta("thread_name", device, stream, "name", absl::StrCat("stream ", stream));
        ev_->MetaIndex("thread_sort_index", device, stream, stream);
      }
      auto syncs = sync_rows_.find(device);
      if (syncs == sync_rows_.end()) continue;
      for (int64_t stream : syncs->second) {
        const int64_t tid = stream + kSyncRowOffset;
        ev_->Meta("thread_name", device, tid, "name", absl::StrCat("stream ", stream, " (sync)"));
        ev_->MetaIndex("thread_sort_index", device, tid, stream);
      }
    }
    if (!r_.overheads.empty()) {
      ev_->Meta("process_name", kOverheadPid, 0, "name", "CUPTI Overhead");
      ev_->MetaIndex("process_sort_index", kOverheadPid, 0, kOverheadSortIndex);
    }
  }

  // Opens "args" with "External id" when the correlation maps to a gpuctl
  // range. Every caller then appends at least one more member.
  void BeginArgs(uint32_t correlation) {
    absl::StrAppend(out_, ", \"args\": {");
    const uint64_t* range = correlation != 0 ? external_.Find(correlation) : nullptr;
    if (range != nullptr) absl::StrAppend(out_, "\"External id\": ", *range, ", ");
  }

  void AppendGraph(uint32_t graph_id, uint64_t graph_node_id) {
    if (graph_id != 0 || graph_node_id != 0) {
      absl::StrAppend(out_, ", \"graph id\": ", graph_id, ", \"graph node id\": ", graph_node_id);
    }
  }

  // Ends a GPU op's event and adds the flow end when its launch is known.
  void EndGpuOp(uint32_t correlation, Row row, int64_t start_ns) {
    absl::StrAppend(out_, "}}");
    if (correlation != 0 && launch_.Contains(correlation)) {
      ev_->Flow('f', correlation, row.pid, row.tid, start_ns);
    }
  }

  void WriteApiCall(size_t index) {
    const ApiCallRecord& c = r_.api_calls[index];
    bool runtime = c.domain == rec::kApiDomainRuntime;
    ev_->Complete(runtime ? "cuda_runtime" : "cuda_driver", r_.strings[c.name], pid_, c.tid,
                  c.start_ns, c.end_ns);
    BeginArgs(c.correlation_id);
    absl::StrAppend(out_, "\"cbid\": ", c.cbid, ", \"correlation\": ", c.correlation_id, "}}");
    const size_t* launch = launch_.Find(c.correlation_id);
    if (launch != nullptr && *launch == index && gpu_correlations_.Contains(c.correlation_id)) {
      ev_->Flow('s', c.correlation_id, pid_, c.tid, c.start_ns);
    }
  }

  void WriteMarker(const MarkerRecord& m) {
    if (m.flags & rec::kMarkerFlagInstant) {
      ev_->Instant("user_annotation", r_.strings[m.name], pid_, m.tid, m.start_ns);
    } else {
      ev_->Complete("user_annotation", r_.strings[m.name], pid_, m.tid, m.start_ns, m.end_ns);
      if (observer_ != nullptr) {
        observer_->OnAnnotation(r_.strings[m.name], m.tid, m.start_ns, m.end_ns);
      }
    }
    absl::StrAppend(out_, ", \"args\": {\"nvtx marker id\": ", m.marker_id);
    if (!r_.strings[m.domain].empty()) {
      absl::StrAppend(out_, ", \"nvtx domain\": ");
      AppendJsonString(out_, r_.strings[m.domain]);
    }
    absl::StrAppend(out_, "}}");
  }

  void WriteKernel(const KernelRecord& k) {
    Row row{k.device_id, k.stream_id};
    ev_->Complete("kernel", r_.strings[k.name], row.pid, row.tid, k.start_ns, k.end_ns);
    if (observer_ != nullptr) {
      observer_->OnGpuOp(TraceEventObserver::GpuOpType::kKernel, k.device_id, k.stream_id, k.name,
                         r_.strings[k.name], k.start_ns, k.end_ns);
    }
    BeginArgs(k.correlation_id);
    absl::StrAppend(out_, "\"device\": ", k.device_id, ", \"context\": ", k.context_id,
                    ", \"stream\": ", k.stream_id, ", \"correlation\": ", k.correlation_id,
                    ", \"registers per thread\": ", k.registers_per_thread, ", \"shared memory\": ",
                    uint64_t{k.static_shared_memory} + k.dynamic_shared_memory);
    std::optional<KernelOccupancy> occupancy;
    if (auto it = devices_.find(k.device_id); it != devices_.end()) {
      occupancy = EstimateOccupancy(k, *it->second);
    }
    if (occupancy.has_value()) {
      out_->append(", \"blocks per SM\": ");
      AppendFixed6(out_, occupancy->blocks_per_sm);
      out_->append(", \"warps per SM\": ");
      AppendFixed6(out_, occupancy->warps_per_sm);
    }
    absl::StrAppend(out_, ", \"grid\": [", k.grid[0], ", ", k.grid[1], ", ", k.grid[2],
                    "], \"block\": [", k.block[0], ", ", k.block[1], ", ", k.block[2], "]");
    if (occupancy.has_value()) {
      absl::StrAppend(out_, ", \"est. achieved occupancy %\": ", occupancy->occupancy_percent);
    }
    AppendGraph(k.graph_id, k.graph_node_id);
    EndGpuOp(k.correlation_id, row, k.start_ns);
  }

  void AppendBandwidth(uint64_t bytes, int64_t start_ns, int64_t end_ns) {
    absl::StrAppend(out_, ", \"bytes\": ", bytes, ", \"memory bandwidth (GB/s)\": ");
    if (end_ns > start_ns) {
      // Bytes per ns is GB/s.
      absl::StrAppend(out_, static_cast<double>(bytes) / static_cast<double>(end_ns - start_ns));
    } else {
      absl::StrAppend(out_, "\"N/A\"");
    }
  }

  void WriteMemcpy(const MemcpyRecord& m) {
    Row row{m.device_id, m.stream_id};
    std::string name =
        absl::StrCat("Memcpy ", MemcpyKindName(m.copy_kind), " (", MemoryKindName(m.src_kind),
                     " -> ", MemoryKindName(m.dst_kind), ")");
    ev_->Complete("gpu_memcpy", name, row.pid, row.tid, m.start_ns, m.end_ns);
    if (observer_ != nullptr) {
      observer_->OnGpuOp(TraceEventObserver::GpuOpType::kMemcpy, m.device_id, m.stream_id, 0, {},
                         m.start_ns, m.end_ns);
    }
    BeginArgs(m.correlation_id);
    absl::StrAppend(out_, "\"device\": ", m.device_id, ", \"context\": ", m.context_id);
    if (m.flags & rec::kMemcpyFlagPeer) {
      absl::StrAppend(out_, ", \"fromDevice\": ", m.src_device, ", \"inDevice\": ", m.device_id,
                      ", \"toDevice\": ", m.dst_device, ", \"fromContext\": ", m.src_context,
                      ", \"inContext\": ", m.context_id, ", \"toContext\": ", m.dst_context);
    }
    absl::StrAppend(out_, ", \"stream\": ", m.stream_id, ", \"correlation\": ", m.correlation_id);
    AppendBandwidth(m.bytes, m.start_ns, m.end_ns);
    AppendGraph(m.graph_id, m.graph_node_id);
    EndGpuOp(m.correlation_id, row, m.start_ns);
  }

  void WriteMemset(const MemsetRecord& m) {
    Row row{m.device_id, m.stream_id};
    ev_->Complete("gpu_memset", absl::StrCat("Memset (", MemoryKindName(m.memory_kind), ")"),
                  row.pid, row.tid, m.start_ns, m.end_ns);
    if (observer_ != nullptr) {
      observer_->OnGpuOp(TraceEventObserver::GpuOpType::kMemset, m.device_id, m.stream_id, 0, {},
                         m.start_ns, m.end_ns);
    }
    BeginArgs(m.correlation_id);
    absl::StrAppend(out_, "\"device\": ", m.device_id, ", \"context\": ", m.context_id,
                    ", \"stream\": ", m.stream_id, ", \"correlation\": ", m.correlation_id);
    AppendBandwidth(m.bytes, m.start_ns, m.end_ns);
    AppendGraph(m.graph_id, m.graph_node_id);
    EndGpuOp(m.correlation_id, row, m.start_ns);
  }

  void WriteSync(const SyncRecord& s) {
    auto device = context_device_.find(s.context_id);
    Row row{pid_, 0};
    if (device != context_device_.end()) {
      row = {device->second, SyncTid(s)};
    } else if (const size_t* launch = launch_.Find(s.correlation_id); launch != nullptr) {
      // No GPU op of that context in the window: show it on the calling
      // thread rather than guess a device.
      row.tid = r_.api_calls[*launch].tid;
    }
    ev_->Complete("cuda_sync", SyncTypeName(s.type), row.pid, row.tid, s.start_ns, s.end_ns);
    BeginArgs(s.correlation_id);
    absl::StrAppend(out_, "\"cuda_sync_kind\": \"", SyncTypeName(s.type), "\"");
    if (s.type == 1 || s.type == 2) {  // event synchronize, stream wait event
      absl::StrAppend(out_, ", \"wait_on_cuda_event_id\": ", static_cast<int32_t>(s.cuda_event_id));
    }
    // "stream" is -1: consumers (Holistic Trace Analysis) count every event
    // with a stream as GPU work, and a synchronization is host time. The
    // stream it names is "sync stream".
    absl::StrAppend(out_, ", \"stream\": -1, \"sync stream\": ", SyncStream(s),
                    ", \"correlation\": ", s.correlation_id);
    if (device != context_device_.end()) absl::StrAppend(out_, ", \"device\": ", device->second);
    absl::StrAppend(out_, ", \"context\": ", s.context_id);
    EndGpuOp(s.correlation_id, row, s.start_ns);
  }

  void WriteOverhead(const OverheadRecord& o) {
    ev_->Complete("overhead", OverheadKindName(o.overhead_kind), kOverheadPid, 0, o.start_ns,
                  o.end_ns);
    absl::StrAppend(out_, ", \"args\": {\"overhead kind\": ", o.overhead_kind,
                    ", \"object kind\": ", o.object_kind, ", \"object id\": [", o.object_id[0],
                    ", ", o.object_id[1], ", ", o.object_id[2], "]}}");
  }

  const DecodedRecords& r_;
  const int64_t pid_;
  EventWriter* ev_;
  TraceEventObserver* observer_;
  std::string* out_;
  const CorrelationSpan span_;
  // correlation id -> index into api_calls of the launching call.
  CorrelationMap<size_t> launch_;
  // correlation id -> gpuctl range id.
  CorrelationMap<uint64_t> external_;
  absl::flat_hash_map<uint32_t, const DeviceInfoRecord*> devices_;
  absl::flat_hash_map<uint32_t, uint32_t> context_device_;
  // Correlation ids of GPU ops (and synchronizations): 1 when present.
  CorrelationMap<uint8_t> gpu_correlations_;
  // GPU rows: device -> stream tids, sorted for stable metadata.
  std::map<uint32_t, std::set<int64_t>> streams_;
  // Stream synchronize rows: device -> the streams synchronized.
  std::map<uint32_t, std::set<int64_t>> sync_rows_;
};

}  // namespace

void AppendDeviceProperties(const DecodedRecords& records, std::string* out) {
  std::map<uint32_t, const DeviceInfoRecord*> by_id;
  for (const DeviceInfoRecord& d : records.device_infos) by_id.emplace(d.device_id, &d);
  bool first = true;
  for (const auto& [id, d] : by_id) {
    // CUPTI does not report the opt-in per-block maximum; it is the per-SM
    // shared memory less the driver's per-block reservation.
    uint32_t reserved = ReservedSharedMemoryPerBlock(*d);
    uint32_t optin = d->max_shared_memory_per_sm > reserved ? d->max_shared_memory_per_sm - reserved
                                                            : d->max_shared_memory_per_sm;
    absl::StrAppend(out, first ? "\n    {" : ",\n    {", "\"id\": ", id, ", \"name\": ");
    first = false;
    AppendJsonString(out, records.strings[d->name]);
    absl::StrAppend(
        out, ", \"totalGlobalMem\": ", d->global_memory_bytes,
        ", \"computeMajor\": ", d->compute_major, ", \"computeMinor\": ", d->compute_minor,
        ", \"maxThreadsPerBlock\": ", d->max_threads_per_block,
        ", \"maxThreadsPerMultiprocessor\": ", d->max_threads_per_sm,
        ", \"regsPerBlock\": ", d->max_registers_per_block,
        ", \"regsPerMultiprocessor\": ", d->max_registers_per_sm, ", \"warpSize\": ", d->warp_size,
        ", \"sharedMemPerBlock\": ", d->max_shared_memory_per_block,
        ", \"sharedMemPerMultiprocessor\": ", d->max_shared_memory_per_sm,
        ", \"numSms\": ", d->sm_count, ", \"sharedMemPerBlockOptin\": ", optin, "}");
  }
  if (!first) out->append("\n  ");
}

void AppendCaptureInfo(const DecodedRecords& records, std::string* out) {
  CaptureInfoRecord info{};
  if (records.capture_info.has_value()) info = *records.capture_info;
  bool host_only = info.flags & rec::kCaptureFlagHostOnly;
  absl::string_view message =
      records.capture_info.has_value() ? records.strings[info.message] : absl::string_view();
  absl::string_view path =
      records.capture_info.has_value() ? records.strings[info.cupti_path] : absl::string_view();
  absl::StrAppend(out, ", \"host_only\": ", host_only ? "true" : "false",
                  ", \"host_only_reason\": ");
  AppendJsonString(out, host_only ? message : absl::string_view());
  absl::StrAppend(out, ", \"activities\": [");
  bool first = true;
  for (absl::string_view name : ActivityNamesFromBits(info.activities)) {
    absl::StrAppend(out, first ? "\"" : ", \"", name, "\"");
    first = false;
  }
  absl::StrAppend(out, "], \"cupti_version\": ", info.cupti_version, ", \"cupti_path\": ");
  AppendJsonString(out, path);
  absl::StrAppend(
      out, ", \"cupti_active\": ", (info.flags & rec::kCaptureFlagCuptiActive) ? "true" : "false",
      ", \"cupti_failed\": ", (info.flags & rec::kCaptureFlagCuptiFailed) ? "true" : "false",
      ", \"cupti_message\": ");
  AppendJsonString(out, host_only ? absl::string_view() : message);
  absl::StrAppend(out, ", \"cupti_dropped_records\": ", info.dropped_by_cupti,
                  ", \"dropped_at_cap\": ", info.dropped_at_cap);
  if (info.activities & rec::kActivityMemory) {
    // The counter tracks start at 0: allocations before the window are
    // not seen, so their bytes are missing from every sample.
    absl::StrAppend(out, ", \"memory_counter_baseline\": \"window_start\"",
                    ", \"memory_records_skipped\": ", records.skipped_memory_records);
  }
}

void WriteGpuEvents(const DecodedRecords& records, int64_t pid, EventWriter* events) {
  GpuEventWriter(records, pid, events).Write();
}

}  // namespace gpuctl::daemon::chrome_internal
