// Validation of the GPU record kinds (records.h, minor 1), decoded by
// ReadRecords from their field tables.
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

absl::Status CheckDims(uint64_t index, absl::string_view what, const rec::I32x3& dims,
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

}  // namespace

absl::Status Accept(uint64_t index, const KernelRecord& k, Limits limits, DecodedRecords* out) {
  if (auto st = CheckString(index, k.name, *out); !st.ok()) return st;
  if (auto st = CheckInterval(index, "kernel", k.start_ns, k.end_ns, limits); !st.ok()) return st;
  if (auto st = CheckDims(index, "grid", k.grid, kMaxGridYZ, INT32_MAX); !st.ok()) return st;
  if (auto st = CheckDims(index, "block", k.block, kMaxBlockDim, kMaxBlockDim); !st.ok()) {
    return st;
  }
  out->kernels.push_back(k);
  return absl::OkStatus();
}

absl::Status Accept(uint64_t index, const MemcpyRecord& m, Limits limits, DecodedRecords* out) {
  if (auto st = CheckInterval(index, "memcpy", m.start_ns, m.end_ns, limits); !st.ok()) return st;
  out->memcpys.push_back(m);
  return absl::OkStatus();
}

absl::Status Accept(uint64_t index, const MemsetRecord& m, Limits limits, DecodedRecords* out) {
  if (auto st = CheckInterval(index, "memset", m.start_ns, m.end_ns, limits); !st.ok()) return st;
  out->memsets.push_back(m);
  return absl::OkStatus();
}

absl::Status Accept(uint64_t index, const ApiCallRecord& a, Limits limits, DecodedRecords* out) {
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

absl::Status Accept(uint64_t index, const SyncRecord& s, Limits limits, DecodedRecords* out) {
  if (auto st = CheckInterval(index, "synchronization", s.start_ns, s.end_ns, limits); !st.ok()) {
    return st;
  }
  out->syncs.push_back(s);
  return absl::OkStatus();
}

absl::Status Accept(uint64_t index, const MarkerRecord& m, Limits limits, DecodedRecords* out) {
  if (auto st = CheckString(index, m.name, *out); !st.ok()) return st;
  if (auto st = CheckString(index, m.domain, *out); !st.ok()) return st;
  if (auto st = CheckInterval(index, "marker", m.start_ns, m.end_ns, limits); !st.ok()) return st;
  out->markers.push_back(m);
  return absl::OkStatus();
}

absl::Status Accept(uint64_t index, const OverheadRecord& o, Limits limits, DecodedRecords* out) {
  if (auto st = CheckInterval(index, "overhead", o.start_ns, o.end_ns, limits); !st.ok()) {
    return st;
  }
  out->overheads.push_back(o);
  return absl::OkStatus();
}

absl::Status Accept(uint64_t index, const ExternalCorrelationRecord& e, Limits limits,
                    DecodedRecords* out) {
  out->external_correlations.push_back(e);
  return absl::OkStatus();
}

absl::Status Accept(uint64_t index, const DeviceInfoRecord& d, Limits limits, DecodedRecords* out) {
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

absl::Status Accept(uint64_t index, const CaptureInfoRecord& c, Limits limits,
                    DecodedRecords* out) {
  if (out->capture_info.has_value()) {
    return Invalid("record ", index, ": a second capture info record");
  }
  if (auto st = CheckString(index, c.message, *out); !st.ok()) return st;
  if (auto st = CheckString(index, c.cupti_path, *out); !st.ok()) return st;
  out->capture_info = c;
  return absl::OkStatus();
}

}  // namespace gpuctl::daemon::record_decode
