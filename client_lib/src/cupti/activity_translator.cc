#include "client_lib/src/cupti/activity_translator.h"

#include <algorithm>
#include <type_traits>

#include "gpuctl/v1/records.h"

namespace gpuctl::client::cupti {
namespace {

// Bytes a string costs in the payload's string table.
uint64_t StringCost(std::string_view s) {
  return 4 + (std::min<size_t>(s.size(), records::kMaxStringLength) + 3) / 4 * 4;
}

// CUPTI hands records as CUpti_Activity*; the kind field says which
// struct it is (the documented way to read them).
template <typename T>
const T& As(const CUpti_Activity* record) {
  return *reinterpret_cast<const T*>(record);
}

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel".
std::string StripVersionSuffix(std::string name) {
  const size_t pos = name.rfind("_v");
  if (pos != std::string::npos && pos + 2 < name.size() &&
      std::all_of(name.begin() + pos + 2, name.end(),
                  [](char c) { return c >= '0' && c <= '9'; })) {
    name.resize(pos);
  }
  return name;
}

template <typename R>
bool Overlaps(const R& r, int64_t start, int64_t end) {
  if constexpr (std::is_same_v<R, MemoryRecord> || std::is_same_v<R, MemoryPoolRecord>) {
    return r.ts_ns >= start && r.ts_ns <= end;
  } else {
    return r.end_ns >= start && r.start_ns <= end;
  }
}

}  // namespace

bool ActivityTranslator::IsNoiseCall(CUpti_CallbackDomain domain, uint32_t cbid) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v10010:
      case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_ptsz_v10010:
      case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_v11030:
      case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_ptsz_v11030:
      case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v12030:
      case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_ptsz_v12030:
      case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaPointerGetAttributes_v4000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaFuncGetAttributes_v3020:
        return true;
      default:
        return false;
    }
  }
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    switch (cbid) {
      case CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress:
      case CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2:
      case CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent:
      case CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice:
      case CUPTI_DRIVER_TRACE_CBID_cuDeviceGet:
      case CUPTI_DRIVER_TRACE_CBID_cuDeviceGetAttribute:
      case CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute:
      case CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttributes:
      case CUPTI_DRIVER_TRACE_CBID_cuGetErrorString:
      case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState:
      case CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing:
      case CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo:
      case CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v2:
      case CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v2_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v3:
      case CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v3_ptsz:
        return true;
      default:
        return false;
    }
  }
  return false;
}

void ActivityTranslator::Reset(uint64_t max_bytes, int64_t clock_offset_ns,
                               CallbackNameFn callback_name) {
  bytes_left_ = max_bytes;
  clock_offset_ns_ = clock_offset_ns;
  callback_name_ = std::move(callback_name);
  records_.clear();
  strings_.clear();
  string_index_.clear();
  api_names_.clear();
  open_markers_.clear();
  devices_.clear();
  dropped_at_cap_ = skipped_unknown_ = filtered_calls_ = clipped_ = 0;
}

bool ActivityTranslator::Reserve(uint64_t size) {
  if (size > bytes_left_) {
    ++dropped_at_cap_;
    return false;
  }
  bytes_left_ -= size;
  return true;
}

uint32_t ActivityTranslator::Intern(std::string_view s) {
  auto [it, inserted] =
      string_index_.try_emplace(std::string(s), static_cast<uint32_t>(strings_.size()));
  if (inserted) {
    // Strings are charged to the cap too; one already kept costs nothing.
    const uint64_t cost = StringCost(s);
    bytes_left_ -= std::min(bytes_left_, cost);
    strings_.emplace_back(s);
  }
  return it->second;
}

int64_t ActivityTranslator::Ts(uint64_t cupti_ns) const {
  return static_cast<int64_t>(cupti_ns) + clock_offset_ns_;
}

void ActivityTranslator::Add(const CUpti_Activity* record) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL:
      return AddKernel(As<CUpti_ActivityKernel10>(record));
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return AddMemcpy(As<CUpti_ActivityMemcpy6>(record));
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      return AddPeerMemcpy(As<CUpti_ActivityMemcpyPtoP4>(record));
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return AddMemset(As<CUpti_ActivityMemset4>(record));
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      return AddApi(As<CUpti_ActivityAPI>(record), CUPTI_CB_DOMAIN_RUNTIME_API);
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return AddApi(As<CUpti_ActivityAPI>(record), CUPTI_CB_DOMAIN_DRIVER_API);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return AddSync(As<CUpti_ActivitySynchronization2>(record));
    case CUPTI_ACTIVITY_KIND_MARKER:
      return AddMarker(As<CUpti_ActivityMarker2>(record));
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      return AddOverhead(As<CUpti_ActivityOverhead3>(record));
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      return AddExternalCorrelation(As<CUpti_ActivityExternalCorrelation>(record));
    case CUPTI_ACTIVITY_KIND_DEVICE:
      return AddDevice(As<CUpti_ActivityDevice5>(record));
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      return AddMemory(As<CUpti_ActivityMemory4>(record));
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
      return AddMemoryPool(As<CUpti_ActivityMemoryPool3>(record));
    default:
      ++skipped_unknown_;
      return;
  }
}

void ActivityTranslator::AddKernel(const CUpti_ActivityKernel10& k) {
  if (!Reserve(records::kKernelSize)) return;
  KernelRecord r;
  r.device_id = k.deviceId;
  r.context_id = k.contextId;
  r.stream_id = k.streamId;
  r.correlation_id = k.correlationId;
  r.name = Intern(k.name != nullptr ? k.name : "");
  r.start_ns = Ts(k.start);
  r.end_ns = Ts(k.end);
  r.grid[0] = k.gridX;
  r.grid[1] = k.gridY;
  r.grid[2] = k.gridZ;
  r.block[0] = k.blockX;
  r.block[1] = k.blockY;
  r.block[2] = k.blockZ;
  r.registers_per_thread = k.registersPerThread;
  r.static_shared_memory = static_cast<uint32_t>(k.staticSharedMemory);
  r.dynamic_shared_memory = static_cast<uint32_t>(k.dynamicSharedMemory);
  r.graph_id = k.graphId;
  r.graph_node_id = k.graphNodeId;
  r.shared_memory_executed = k.sharedMemoryExecuted;
  r.local_memory_per_thread = k.localMemoryPerThread;
  // CUPTI marks unknown queue times with CUPTI_TIMESTAMP_UNKNOWN (0).
  r.queued_ns = k.queued != 0 ? Ts(k.queued) : 0;
  r.cache_config_executed = k.cacheConfig.config.executed;
  r.launch_type = k.launchType;
  records_.emplace_back(r);
}

void ActivityTranslator::AddMemcpy(const CUpti_ActivityMemcpy6& m) {
  if (!Reserve(records::kMemcpySize)) return;
  MemcpyRecord r;
  r.device_id = r.src_device = r.dst_device = m.deviceId;
  r.context_id = r.src_context = r.dst_context = m.contextId;
  r.stream_id = m.streamId;
  r.correlation_id = m.correlationId;
  r.copy_kind = m.copyKind;
  r.src_kind = m.srcKind;
  r.dst_kind = m.dstKind;
  r.flags = (m.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0 ? records::kMemcpyFlagAsync : 0;
  r.start_ns = Ts(m.start);
  r.end_ns = Ts(m.end);
  r.bytes = m.bytes;
  r.graph_id = m.graphId;
  r.graph_node_id = m.graphNodeId;
  records_.emplace_back(r);
}

void ActivityTranslator::AddPeerMemcpy(const CUpti_ActivityMemcpyPtoP4& m) {
  if (!Reserve(records::kMemcpySize)) return;
  MemcpyRecord r;
  r.device_id = m.deviceId;
  r.context_id = m.contextId;
  r.stream_id = m.streamId;
  r.correlation_id = m.correlationId;
  r.copy_kind = m.copyKind;
  r.src_kind = m.srcKind;
  r.dst_kind = m.dstKind;
  r.flags = records::kMemcpyFlagPeer |
            ((m.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0 ? records::kMemcpyFlagAsync : 0);
  r.start_ns = Ts(m.start);
  r.end_ns = Ts(m.end);
  r.bytes = m.bytes;
  r.src_device = m.srcDeviceId;
  r.dst_device = m.dstDeviceId;
  r.src_context = m.srcContextId;
  r.dst_context = m.dstContextId;
  r.graph_id = m.graphId;
  r.graph_node_id = m.graphNodeId;
  records_.emplace_back(r);
}

void ActivityTranslator::AddMemset(const CUpti_ActivityMemset4& m) {
  if (!Reserve(records::kMemsetSize)) return;
  MemsetRecord r;
  r.device_id = m.deviceId;
  r.context_id = m.contextId;
  r.stream_id = m.streamId;
  r.correlation_id = m.correlationId;
  r.value = m.value;
  r.start_ns = Ts(m.start);
  r.end_ns = Ts(m.end);
  r.bytes = m.bytes;
  r.memory_kind = m.memoryKind;
  r.flags = (m.flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) != 0 ? records::kMemsetFlagAsync : 0;
  r.graph_id = m.graphId;
  r.graph_node_id = m.graphNodeId;
  records_.emplace_back(r);
}

void ActivityTranslator::AddApi(const CUpti_ActivityAPI& a, CUpti_CallbackDomain domain) {
  if (IsNoiseCall(domain, a.cbid)) {
    ++filtered_calls_;
    return;
  }
  if (!Reserve(records::kApiCallSize)) return;
  ApiCallRecord r;
  r.domain = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? records::kApiDomainRuntime
                                                   : records::kApiDomainDriver;
  r.cbid = a.cbid;
  r.correlation_id = a.correlationId;
  r.pid = a.processId;
  r.tid = a.threadId;
  r.start_ns = Ts(a.start);
  r.end_ns = Ts(a.end);
  r.return_value = a.returnValue;
  const uint64_t key = (uint64_t{r.domain} << 32) | a.cbid;
  auto it = api_names_.find(key);
  if (it == api_names_.end()) {
    std::string name = callback_name_ ? StripVersionSuffix(callback_name_(domain, a.cbid)) : "";
    if (name.empty()) name = "cbid " + std::to_string(a.cbid);
    it = api_names_.emplace(key, Intern(name)).first;
  }
  r.name = it->second;
  records_.emplace_back(r);
}

void ActivityTranslator::AddSync(const CUpti_ActivitySynchronization2& s) {
  if (!Reserve(records::kSyncSize)) return;
  SyncRecord r;
  r.type = s.type;
  r.context_id = s.contextId;
  r.stream_id = s.streamId;
  r.cuda_event_id = s.cudaEventId;
  r.correlation_id = s.correlationId;
  r.start_ns = Ts(s.start);
  r.end_ns = Ts(s.end);
  r.return_value = s.returnValue;
  records_.emplace_back(r);
}

void ActivityTranslator::AddMarker(const CUpti_ActivityMarker2& m) {
  const int64_t ts = Ts(m.timestamp);
  if ((m.flags & CUPTI_ACTIVITY_FLAG_MARKER_END) != 0) {
    auto it = open_markers_.find(m.id);
    // An end whose start came before the window has no name: left out.
    if (it == open_markers_.end()) return;
    it->second.end_ns = ts;
    records_.emplace_back(it->second);
    open_markers_.erase(it);
    return;
  }
  const bool instant = (m.flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) != 0;
  if (!instant && (m.flags & CUPTI_ACTIVITY_FLAG_MARKER_START) == 0) return;
  if (!Reserve(records::kMarkerSize)) return;
  MarkerRecord r;
  if (m.objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS ||
      m.objectKind == CUPTI_ACTIVITY_OBJECT_THREAD) {
    r.pid = m.objectId.pt.processId;
    r.tid = m.objectId.pt.threadId;
  }
  r.marker_id = m.id;
  r.start_ns = r.end_ns = ts;
  r.name = Intern(m.name != nullptr ? m.name : "");
  r.domain = Intern(m.domain != nullptr ? m.domain : "");
  if (instant) {
    r.flags = records::kMarkerFlagInstant;
    records_.emplace_back(r);
  } else {
    open_markers_[m.id] = r;
  }
}

void ActivityTranslator::AddOverhead(const CUpti_ActivityOverhead3& o) {
  if (!Reserve(records::kOverheadSize)) return;
  OverheadRecord r;
  r.overhead_kind = o.overheadKind;
  r.object_kind = o.objectKind;
  if (o.objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS ||
      o.objectKind == CUPTI_ACTIVITY_OBJECT_THREAD) {
    r.object_id[0] = o.objectId.pt.processId;
    r.object_id[1] = o.objectId.pt.threadId;
  } else {
    r.object_id[0] = o.objectId.dcs.deviceId;
    r.object_id[1] = o.objectId.dcs.contextId;
    r.object_id[2] = o.objectId.dcs.streamId;
  }
  r.start_ns = Ts(o.start);
  r.end_ns = Ts(o.end);
  r.correlation_id = o.correlationId;
  records_.emplace_back(r);
}

void ActivityTranslator::AddExternalCorrelation(const CUpti_ActivityExternalCorrelation& e) {
  if (!Reserve(records::kExternalCorrelationSize)) return;
  records_.emplace_back(ExternalCorrelationRecord{static_cast<uint32_t>(e.externalKind),
                                                  e.correlationId, e.externalId});
}

void ActivityTranslator::AddDevice(const CUpti_ActivityDevice5& d) {
  if (!devices_.insert(d.id).second) return;
  if (!Reserve(records::kDeviceInfoSize)) return;
  DeviceInfoRecord r;
  r.device_id = d.id;
  r.name = Intern(d.name != nullptr ? d.name : "");
  r.compute_major = d.computeCapabilityMajor;
  r.compute_minor = d.computeCapabilityMinor;
  r.sm_count = d.numMultiprocessors;
  r.max_threads_per_sm = d.maxWarpsPerMultiprocessor * d.numThreadsPerWarp;
  r.max_threads_per_block = d.maxThreadsPerBlock;
  r.max_registers_per_sm = d.maxRegistersPerMultiprocessor;
  r.max_registers_per_block = d.maxRegistersPerBlock;
  r.max_shared_memory_per_sm = d.maxSharedMemoryPerMultiprocessor;
  r.max_shared_memory_per_block = d.maxSharedMemoryPerBlock;
  r.max_blocks_per_sm = d.maxBlocksPerMultiprocessor;
  r.warp_size = d.numThreadsPerWarp;
  r.global_memory_bytes = d.globalMemorySize;
  r.global_memory_bandwidth = d.globalMemoryBandwidth;
  r.l2_cache_bytes = d.l2CacheSize;
  r.core_clock_khz = d.coreClockRate;
  records_.emplace_back(r);
}

void ActivityTranslator::Emit(RecordWriter& writer, int64_t window_start_ns,
                              int64_t window_end_ns) {
  for (auto& [id, open] : open_markers_) {
    open.end_ns = window_end_ns;
    records_.emplace_back(open);
  }
  open_markers_.clear();
  std::vector<uint32_t> remap(strings_.size());
  for (size_t i = 0; i < strings_.size(); ++i) remap[i] = writer.InternString(strings_[i]);
  for (Record& record : records_) {
    std::visit(
        [&](auto& r) {
          using T = std::decay_t<decltype(r)>;
          if constexpr (std::is_same_v<T, ExternalCorrelationRecord>) {
            writer.Add(r);
          } else if constexpr (std::is_same_v<T, DeviceInfoRecord>) {
            r.name = remap[r.name];
            writer.Add(r);
          } else {
            if (!Overlaps(r, window_start_ns, window_end_ns)) {
              ++clipped_;
              return;
            }
            if constexpr (std::is_same_v<T, KernelRecord> || std::is_same_v<T, ApiCallRecord>) {
              r.name = remap[r.name];
            } else if constexpr (std::is_same_v<T, MarkerRecord>) {
              r.name = remap[r.name];
              r.domain = remap[r.domain];
            }
            writer.Add(r);
          }
        },
        record);
  }
  records_.clear();
}

}  // namespace gpuctl::client::cupti
