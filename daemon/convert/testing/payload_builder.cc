#include "daemon/convert/testing/payload_builder.h"

#include "gpuctl/v1/record_codec.h"

namespace gpuctl::testing {
namespace {

void Append16(std::vector<uint8_t>* out, uint16_t v) {
  size_t at = out->size();
  out->resize(at + 2);
  Store16(out, at, v);
}
void Append32(std::vector<uint8_t>* out, uint32_t v) {
  size_t at = out->size();
  out->resize(at + 4);
  Store32(out, at, v);
}

}  // namespace

void Store16(std::vector<uint8_t>* out, size_t at, uint16_t v) {
  (*out)[at] = static_cast<uint8_t>(v);
  (*out)[at + 1] = static_cast<uint8_t>(v >> 8);
}
void Store32(std::vector<uint8_t>* out, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*out)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void Store64(std::vector<uint8_t>* out, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*out)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

PayloadBuilder::PayloadBuilder(int32_t pid, int64_t window_start_ns, int64_t window_end_ns)
    : pid_(pid),
      window_start_ns_(window_start_ns),
      window_end_ns_(window_end_ns),
      major_(records::kVersionMajor),
      minor_(records::kVersionMinor) {}

uint32_t PayloadBuilder::AddString(absl::string_view s) {
  Append32(&strings_, static_cast<uint32_t>(s.size()));
  strings_.insert(strings_.end(), s.begin(), s.end());
  while (strings_.size() % 4 != 0) strings_.push_back(0);
  return static_cast<uint32_t>(string_count_++);
}

void PayloadBuilder::AddRange(uint32_t tid, int64_t start_ns, int64_t end_ns, uint32_t name,
                              uint32_t depth, uint64_t range_id) {
  Add(records::RangeRecord{tid, start_ns, end_ns, name, depth, range_id});
}

void PayloadBuilder::AddRange(uint32_t tid, int64_t start_ns, int64_t end_ns,
                              absl::string_view name, uint32_t depth, uint64_t range_id) {
  AddRange(tid, start_ns, end_ns, AddString(name), depth, range_id);
}

void PayloadBuilder::AddStep(uint32_t tid, int64_t ts_ns, uint64_t step) {
  Add(records::StepRecord{tid, ts_ns, step});
}

void PayloadBuilder::AddThreadName(uint32_t tid, absl::string_view name) {
  Add(records::ThreadNameRecord{tid, AddString(name)});
}

// The specs name a few fields for brevity (device for device_id, ...);
// fields a spec leaves out are 0.

void PayloadBuilder::AddKernel(const KernelSpec& k) {
  records::KernelRecord r;
  r.device_id = k.device;
  r.context_id = k.context;
  r.stream_id = k.stream;
  r.correlation_id = k.correlation;
  r.name = AddString(k.name);
  r.start_ns = k.start_ns;
  r.end_ns = k.end_ns;
  r.grid = {k.grid[0], k.grid[1], k.grid[2]};
  r.block = {k.block[0], k.block[1], k.block[2]};
  r.registers_per_thread = k.registers_per_thread;
  r.static_shared_memory = k.static_shared_memory;
  r.dynamic_shared_memory = k.dynamic_shared_memory;
  r.graph_id = k.graph_id;
  r.graph_node_id = k.graph_node_id;
  r.shared_memory_executed = k.shared_memory_executed;
  Add(r);
}

void PayloadBuilder::AddMemcpy(const MemcpySpec& m) {
  records::MemcpyRecord r;
  r.device_id = m.device;
  r.context_id = m.context;
  r.stream_id = m.stream;
  r.correlation_id = m.correlation;
  r.copy_kind = m.copy_kind;
  r.src_kind = m.src_kind;
  r.dst_kind = m.dst_kind;
  r.flags = m.flags;
  r.start_ns = m.start_ns;
  r.end_ns = m.end_ns;
  r.bytes = m.bytes;
  r.src_device = m.src_device;
  r.dst_device = m.dst_device;
  r.src_context = m.src_context;
  r.dst_context = m.dst_context;
  r.graph_id = m.graph_id;
  r.graph_node_id = m.graph_node_id;
  Add(r);
}

void PayloadBuilder::AddMemset(const MemsetSpec& m) {
  records::MemsetRecord r;
  r.device_id = m.device;
  r.context_id = m.context;
  r.stream_id = m.stream;
  r.correlation_id = m.correlation;
  r.value = m.value;
  r.start_ns = m.start_ns;
  r.end_ns = m.end_ns;
  r.bytes = m.bytes;
  r.memory_kind = m.memory_kind;
  r.flags = m.flags;
  Add(r);
}

void PayloadBuilder::AddApiCall(const ApiCallSpec& a) {
  Add(records::ApiCallRecord{a.domain, a.cbid, a.correlation, a.pid, a.tid, a.start_ns, a.end_ns,
                             AddString(a.name), a.return_value});
}

void PayloadBuilder::AddSync(const SyncSpec& s) {
  records::SyncRecord r;
  r.type = s.type;
  r.context_id = s.context;
  r.stream_id = s.stream;
  r.cuda_event_id = s.cuda_event;
  r.correlation_id = s.correlation;
  r.start_ns = s.start_ns;
  r.end_ns = s.end_ns;
  Add(r);
}

void PayloadBuilder::AddMarker(const MarkerSpec& m) {
  uint32_t name = AddString(m.name);
  uint32_t domain = AddString(m.domain);
  Add(records::MarkerRecord{m.pid, m.tid, m.marker_id, m.start_ns, m.end_ns, name, domain,
                            m.flags});
}

void PayloadBuilder::AddOverhead(const OverheadSpec& o) {
  Add(records::OverheadRecord{o.overhead_kind,
                              o.object_kind,
                              {o.object_id[0], o.object_id[1], o.object_id[2]},
                              o.start_ns,
                              o.end_ns,
                              o.correlation});
}

void PayloadBuilder::AddExternalCorrelation(uint32_t external_kind, uint32_t correlation,
                                            uint64_t external_id) {
  Add(records::ExternalCorrelationRecord{external_kind, correlation, external_id});
}

void PayloadBuilder::AddDeviceInfo(const DeviceInfoSpec& d) {
  records::DeviceInfoRecord r;
  r.device_id = d.device;
  r.name = AddString(d.name);
  r.compute_major = d.compute_major;
  r.compute_minor = d.compute_minor;
  r.sm_count = d.sm_count;
  r.max_threads_per_sm = d.max_threads_per_sm;
  r.max_threads_per_block = d.max_threads_per_block;
  r.max_registers_per_sm = d.max_registers_per_sm;
  r.max_registers_per_block = d.max_registers_per_block;
  r.max_shared_memory_per_sm = d.max_shared_memory_per_sm;
  r.max_shared_memory_per_block = d.max_shared_memory_per_block;
  r.max_blocks_per_sm = d.max_blocks_per_sm;
  r.warp_size = d.warp_size;
  r.global_memory_bytes = d.global_memory_bytes;
  r.global_memory_bandwidth = d.global_memory_bandwidth;
  r.l2_cache_bytes = d.l2_cache_bytes;
  r.core_clock_khz = d.core_clock_khz;
  Add(r);
}

void PayloadBuilder::AddCaptureInfo(const CaptureInfoSpec& c) {
  uint32_t message = AddString(c.message);
  uint32_t cupti_path = AddString(c.cupti_path);
  Add(records::CaptureInfoRecord{c.flags, c.activities, c.cupti_version, c.dropped_by_cupti,
                                 c.dropped_at_cap, message, cupti_path});
}

void PayloadBuilder::AddRawRecord(uint16_t kind, const std::vector<uint8_t>& body) {
  size_t size = (4 + body.size() + 3) & ~size_t{3};
  Append16(&events_, kind);
  Append16(&events_, static_cast<uint16_t>(size));
  events_.insert(events_.end(), body.begin(), body.end());
  while (events_.size() % 4 != 0) events_.push_back(0);
  ++event_count_;
}

std::vector<uint8_t> PayloadBuilder::Build() const {
  const uint64_t header_size = records::kHeaderSize + extra_header_;
  const uint64_t events_offset = header_size;
  const uint64_t strings_offset = events_offset + events_.size();
  records::PayloadHeader h;
  h.magic = records::kMagic;
  h.version_major = major_;
  h.version_minor = minor_;
  h.header_size = static_cast<uint32_t>(header_size);
  h.event_count = event_count_;
  h.events_offset = events_offset;
  h.events_size = events_.size();
  h.strings_offset = strings_offset;
  h.strings_size = strings_.size();
  h.string_count = string_count_;
  h.dropped_events = dropped_events_;
  h.window_start_ns = window_start_ns_;
  h.window_end_ns = window_end_ns_;
  h.pid = pid_;
  std::vector<uint8_t> out(header_size, 0);
  records::EncodeHeader(h, out.data());
  out.insert(out.end(), events_.begin(), events_.end());
  out.insert(out.end(), strings_.begin(), strings_.end());
  return out;
}

}  // namespace gpuctl::testing
