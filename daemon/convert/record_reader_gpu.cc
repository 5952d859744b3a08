// Decoding and validation of the GPU record kinds (records.h, minor 1).
#include <algorithm>

#include "daemon/convert/record_decode.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::daemon::record_decode {
namespace {

namespace rec = ::gpuctl::records;

// CUDA's launch limits: grid x < 2^31, grid y/z and block dimensions far
// below 2^16. Checked so that products of dimensions cannot overflow.
constexpr int32_t kMaxGridYZ = 65535;
constexpr int32_t kMaxBlockDim = 65535;
// More devices than any host has; bounds the duplicate check.
constexpr size_t kMaxDevices = 1024;

absl::Status CheckDims(uint64_t index, absl::string_view what, const int32_t (&dims)[3],
                       int32_t max_yz, int32_t max_x) {
  static constexpr absl::string_view kAxis[] = {"x", "y", "z"};
  for (int i = 0; i < 3; ++i) {
    int32_t max = i == 0 ? max_x : max_yz;
    if (dims[i] < 1 || dims[i] > max) {
      return Invalid("record ", index, ": kernel ", what, " ", kAxis[i], " = ", dims[i],
                     " is outside [1, ", max, "]");
    }
  }
  return absl::OkStatus();
}

absl::Status ReadKernel(uint64_t index, const uint8_t* p, Limits limits, DecodedRecords* out) {
  KernelRecord k{};
  k.device_id = Load32(p + 4);
  k.context_id = Load32(p + 8);
  k.stream_id = Load32(p + 12);
  k.correlation_id = Load32(p + 16);
  k.name = Load32(p + 20);
  k.start_ns = LoadI64(p + 24);
  k.end_ns = LoadI64(p + 32);
  for (int i = 0; i < 3; ++i) {
    k.grid[i] = LoadI32(p + 40 + 4 * i);
    k.block[i] = LoadI32(p + 52 + 4 * i);
  }
  k.registers_per_thread = Load32(p + 64);
  k.static_shared_memory = Load32(p + 68);
  k.dynamic_shared_memory = Load32(p + 72);
  k.graph_id = Load32(p + 76);
  k.graph_node_id = Load64(p + 80);
  k.shared_memory_executed = Load32(p + 88);
  k.local_memory_per_thread = Load32(p + 92);
  k.queued_ns = Load64(p + 96);
  k.cache_config_executed = Load32(p + 104);
  k.launch_type = Load32(p + 108);
  if (auto st = CheckString(index, k.name, *out); !st.ok()) return st;
  if (auto st = CheckInterval(index, "kernel", k.start_ns, k.end_ns, limits); !st.ok()) return st;
  if (auto st = CheckDims(index, "grid", k.grid, kMaxGridYZ, INT32_MAX); !st.ok()) return st;
  if (auto st = CheckDims(index, "block", k.block, kMaxBlockDim, kMaxBlockDim); !st.ok()) {
    return st;
  }
  out->kernels.push_back(k);
  return absl::OkStatus();
}

absl::Status ReadMemcpy(uint64_t index, const uint8_t* p, Limits limits, DecodedRecords* out) {
  MemcpyRecord m{};
  m.device_id = Load32(p + 4);
  m.context_id = Load32(p + 8);
  m.stream_id = Load32(p + 12);
  m.correlation_id = Load32(p + 16);
  m.copy_kind = p[20];
  m.src_kind = p[21];
  m.dst_kind = p[22];
  m.flags = p[23];
  m.start_ns = LoadI64(p + 24);
  m.end_ns = LoadI64(p + 32);
  m.bytes = Load64(p + 40);
  m.src_device = Load32(p + 48);
  m.dst_device = Load32(p + 52);
  m.src_context = Load32(p + 56);
  m.dst_context = Load32(p + 60);
  m.graph_id = Load32(p + 64);
  m.graph_node_id = Load64(p + 72);
  if (auto st = CheckInterval(index, "memcpy", m.start_ns, m.end_ns, limits); !st.ok()) return st;
  out->memcpys.push_back(m);
  return absl::OkStatus();
}

absl::Status ReadMemset(uint64_t index, const uint8_t* p, Limits limits, DecodedRecords* out) {
  MemsetRecord m{};
  m.device_id = Load32(p + 4);
  m.context_id = Load32(p + 8);
  m.stream_id = Load32(p + 12);
  m.correlation_id = Load32(p + 16);
  m.value = Load32(p + 20);
  m.start_ns = LoadI64(p + 24);
  m.end_ns = LoadI64(p + 32);
  m.bytes = Load64(p + 40);
  m.memory_kind = Load16(p + 48);
  m.flags = Load16(p + 50);
  m.graph_id = Load32(p + 52);
  m.graph_node_id = Load64(p + 56);
  if (auto st = CheckInterval(index, "memset", m.start_ns, m.end_ns, limits); !st.ok()) return st;
  out->memsets.push_back(m);
  return absl::OkStatus();
}

absl::Status ReadApiCall(uint64_t index, const uint8_t* p, Limits limits, DecodedRecords* out) {
  ApiCallRecord a{Load32(p + 4),   Load32(p + 8),   Load32(p + 12), Load32(p + 16), Load32(p + 20),
                  LoadI64(p + 24), LoadI64(p + 32), Load32(p + 40), Load32(p + 44)};
  if (a.domain != rec::kApiDomainRuntime && a.domain != rec::kApiDomainDriver) {
    return Invalid("record ", index, ": API call domain ", a.domain, " is neither runtime (",
                   rec::kApiDomainRuntime, ") nor driver (", rec::kApiDomainDriver, ")");
  }
  if (auto st = CheckString(index, a.name, *out); !st.ok()) return st;
  if (auto st = CheckInterval(index, "API call", a.start_ns, a.end_ns, limits); !st.ok()) {
    return st;
  }
  out->api_calls.push_back(a);
  return absl::OkStatus();
}

absl::Status ReadSync(uint64_t index, const uint8_t* p, Limits limits, DecodedRecords* out) {
  SyncRecord s{Load32(p + 4),  Load32(p + 8),   Load32(p + 12),  Load32(p + 16),
               Load32(p + 20), LoadI64(p + 24), LoadI64(p + 32), Load32(p + 40)};
  if (auto st = CheckInterval(index, "synchronization", s.start_ns, s.end_ns, limits); !st.ok()) {
    return st;
  }
  out->syncs.push_back(s);
  return absl::OkStatus();
}

absl::Status ReadMarker(uint64_t index, const uint8_t* p, Limits limits, DecodedRecords* out) {
  MarkerRecord m{Load32(p + 4),   Load32(p + 8),  Load32(p + 12), LoadI64(p + 16),
                 LoadI64(p + 24), Load32(p + 32), Load32(p + 36), Load32(p + 40)};
  if (auto st = CheckString(index, m.name, *out); !st.ok()) return st;
  if (auto st = CheckString(index, m.domain, *out); !st.ok()) return st;
  if (auto st = CheckInterval(index, "marker", m.start_ns, m.end_ns, limits); !st.ok()) return st;
  out->markers.push_back(m);
  return absl::OkStatus();
}

absl::Status ReadOverhead(uint64_t index, const uint8_t* p, Limits limits, DecodedRecords* out) {
  OverheadRecord o{
      Load32(p + 4),   Load32(p + 8),   {Load32(p + 12), Load32(p + 16), Load32(p + 20)},
      LoadI64(p + 24), LoadI64(p + 32), Load32(p + 40)};
  if (auto st = CheckInterval(index, "overhead", o.start_ns, o.end_ns, limits); !st.ok()) {
    return st;
  }
  out->overheads.push_back(o);
  return absl::OkStatus();
}

absl::Status ReadDeviceInfo(uint64_t index, const uint8_t* p, DecodedRecords* out) {
  DeviceInfoRecord d{};
  d.device_id = Load32(p + 4);
  d.name = Load32(p + 8);
  d.compute_major = Load32(p + 12);
  d.compute_minor = Load32(p + 16);
  d.sm_count = Load32(p + 20);
  d.max_threads_per_sm = Load32(p + 24);
  d.max_threads_per_block = Load32(p + 28);
  d.max_registers_per_sm = Load32(p + 32);
  d.max_registers_per_block = Load32(p + 36);
  d.max_shared_memory_per_sm = Load32(p + 40);
  d.max_shared_memory_per_block = Load32(p + 44);
  d.max_blocks_per_sm = Load32(p + 48);
  d.warp_size = Load32(p + 52);
  d.global_memory_bytes = Load64(p + 56);
  d.global_memory_bandwidth_kib_s = Load64(p + 64);
  d.l2_cache_bytes = Load32(p + 72);
  d.core_clock_khz = Load32(p + 76);
  if (auto st = CheckString(index, d.name, *out); !st.ok()) return st;
  if (out->device_infos.size() >= kMaxDevices) {
    return Invalid("record ", index, ": more than ", kMaxDevices, " devices described");
  }
  bool duplicate =
      std::any_of(out->device_infos.begin(), out->device_infos.end(),
                  [&](const DeviceInfoRecord& o) { return o.device_id == d.device_id; });
  if (duplicate) {
    return Invalid("record ", index, ": device ", d.device_id, " is described twice");
  }
  out->device_infos.push_back(d);
  return absl::OkStatus();
}

absl::Status ReadCaptureInfo(uint64_t index, const uint8_t* p, DecodedRecords* out) {
  CaptureInfoRecord c{Load32(p + 4),  Load32(p + 8),  Load32(p + 12), Load64(p + 16),
                      Load64(p + 24), Load32(p + 32), Load32(p + 36)};
  if (out->capture_info.has_value()) {
    return Invalid("record ", index, ": a second capture info record");
  }
  if (auto st = CheckString(index, c.message, *out); !st.ok()) return st;
  if (auto st = CheckString(index, c.cupti_path, *out); !st.ok()) return st;
  out->capture_info = c;
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadGpuRecord(uint64_t index, uint16_t kind, const uint8_t* p, uint16_t size,
                           Limits limits, DecodedRecords* out, bool* known) {
  *known = true;
  auto need = [&](uint16_t min) -> absl::Status {
    return size < min ? TooSmall(index, kind, size, min) : absl::OkStatus();
  };
  absl::Status st;
  switch (static_cast<rec::Kind>(kind)) {
    case rec::Kind::kKernel:
      if (st = need(rec::kKernelSize); !st.ok()) return st;
      return ReadKernel(index, p, limits, out);
    case rec::Kind::kMemcpy:
      if (st = need(rec::kMemcpySize); !st.ok()) return st;
      return ReadMemcpy(index, p, limits, out);
    case rec::Kind::kMemset:
      if (st = need(rec::kMemsetSize); !st.ok()) return st;
      return ReadMemset(index, p, limits, out);
    case rec::Kind::kApiCall:
      if (st = need(rec::kApiCallSize); !st.ok()) return st;
      return ReadApiCall(index, p, limits, out);
    case rec::Kind::kSync:
      if (st = need(rec::kSyncSize); !st.ok()) return st;
      return ReadSync(index, p, limits, out);
    case rec::Kind::kMarker:
      if (st = need(rec::kMarkerSize); !st.ok()) return st;
      return ReadMarker(index, p, limits, out);
    case rec::Kind::kOverhead:
      if (st = need(rec::kOverheadSize); !st.ok()) return st;
      return ReadOverhead(index, p, limits, out);
    case rec::Kind::kExternalCorrelation:
      if (st = need(rec::kExternalCorrelationSize); !st.ok()) return st;
      out->external_correlations.push_back({Load32(p + 4), Load32(p + 8), Load64(p + 16)});
      return absl::OkStatus();
    case rec::Kind::kDeviceInfo:
      if (st = need(rec::kDeviceInfoSize); !st.ok()) return st;
      return ReadDeviceInfo(index, p, out);
    case rec::Kind::kCaptureInfo:
      if (st = need(rec::kCaptureInfoSize); !st.ok()) return st;
      return ReadCaptureInfo(index, p, out);
    default:
      *known = false;
      return absl::OkStatus();
  }
}

}  // namespace gpuctl::daemon::record_decode
