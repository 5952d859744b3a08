#include "daemon/convert/testing/payload_builder.h"

#include "gpuctl/v1/records.h"

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
void Append64(std::vector<uint8_t>* out, uint64_t v) {
  size_t at = out->size();
  out->resize(at + 8);
  Store64(out, at, v);
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
  Append16(&events_, static_cast<uint16_t>(records::Kind::kRange));
  Append16(&events_, records::kRangeSize);
  Append32(&events_, tid);
  Append64(&events_, static_cast<uint64_t>(start_ns));
  Append64(&events_, static_cast<uint64_t>(end_ns));
  Append32(&events_, name);
  Append32(&events_, depth);
  Append64(&events_, range_id);
  ++event_count_;
}

void PayloadBuilder::AddRange(uint32_t tid, int64_t start_ns, int64_t end_ns,
                              absl::string_view name, uint32_t depth, uint64_t range_id) {
  AddRange(tid, start_ns, end_ns, AddString(name), depth, range_id);
}

void PayloadBuilder::AddStep(uint32_t tid, int64_t ts_ns, uint64_t step) {
  Append16(&events_, static_cast<uint16_t>(records::Kind::kStep));
  Append16(&events_, records::kStepSize);
  Append32(&events_, tid);
  Append64(&events_, static_cast<uint64_t>(ts_ns));
  Append64(&events_, step);
  ++event_count_;
}

void PayloadBuilder::AddThreadName(uint32_t tid, absl::string_view name) {
  uint32_t index = AddString(name);
  Append16(&events_, static_cast<uint16_t>(records::Kind::kThreadName));
  Append16(&events_, records::kThreadNameSize);
  Append32(&events_, tid);
  Append32(&events_, index);
  Append32(&events_, 0);
  ++event_count_;
}

namespace {

// Fills a record body field by field; the record's size is the body's.
class Body {
 public:
  explicit Body(size_t size) : bytes_(size - 4, 0) {}
  Body& U8(size_t offset, uint8_t v) {
    bytes_[offset - 4] = v;
    return *this;
  }
  Body& U16(size_t offset, uint16_t v) {
    Store16(&bytes_, offset - 4, v);
    return *this;
  }
  Body& U32(size_t offset, uint32_t v) {
    Store32(&bytes_, offset - 4, v);
    return *this;
  }
  Body& I32(size_t offset, int32_t v) { return U32(offset, static_cast<uint32_t>(v)); }
  Body& U64(size_t offset, uint64_t v) {
    Store64(&bytes_, offset - 4, v);
    return *this;
  }
  Body& I64(size_t offset, int64_t v) { return U64(offset, static_cast<uint64_t>(v)); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

uint16_t KindOf(records::Kind kind) { return static_cast<uint16_t>(kind); }

}  // namespace

void PayloadBuilder::AddKernel(const KernelSpec& k) {
  Body b(records::kKernelSize);
  b.U32(4, k.device).U32(8, k.context).U32(12, k.stream).U32(16, k.correlation);
  b.U32(20, AddString(k.name)).I64(24, k.start_ns).I64(32, k.end_ns);
  for (int i = 0; i < 3; ++i) b.I32(40 + 4 * i, k.grid[i]).I32(52 + 4 * i, k.block[i]);
  b.U32(64, k.registers_per_thread).U32(68, k.static_shared_memory);
  b.U32(72, k.dynamic_shared_memory).U32(76, k.graph_id).U64(80, k.graph_node_id);
  b.U32(88, k.shared_memory_executed);
  AddRawRecord(KindOf(records::Kind::kKernel), b.bytes());
}

void PayloadBuilder::AddMemcpy(const MemcpySpec& m) {
  Body b(records::kMemcpySize);
  b.U32(4, m.device).U32(8, m.context).U32(12, m.stream).U32(16, m.correlation);
  b.U8(20, m.copy_kind).U8(21, m.src_kind).U8(22, m.dst_kind).U8(23, m.flags);
  b.I64(24, m.start_ns).I64(32, m.end_ns).U64(40, m.bytes);
  b.U32(48, m.src_device).U32(52, m.dst_device).U32(56, m.src_context).U32(60, m.dst_context);
  b.U32(64, m.graph_id).U64(72, m.graph_node_id);
  AddRawRecord(KindOf(records::Kind::kMemcpy), b.bytes());
}

void PayloadBuilder::AddMemset(const MemsetSpec& m) {
  Body b(records::kMemsetSize);
  b.U32(4, m.device).U32(8, m.context).U32(12, m.stream).U32(16, m.correlation);
  b.U32(20, m.value).I64(24, m.start_ns).I64(32, m.end_ns).U64(40, m.bytes);
  b.U16(48, m.memory_kind).U16(50, m.flags);
  AddRawRecord(KindOf(records::Kind::kMemset), b.bytes());
}

void PayloadBuilder::AddApiCall(const ApiCallSpec& a) {
  Body b(records::kApiCallSize);
  b.U32(4, a.domain).U32(8, a.cbid).U32(12, a.correlation).U32(16, a.pid).U32(20, a.tid);
  b.I64(24, a.start_ns).I64(32, a.end_ns).U32(40, AddString(a.name)).U32(44, a.return_value);
  AddRawRecord(KindOf(records::Kind::kApiCall), b.bytes());
}

void PayloadBuilder::AddSync(const SyncSpec& s) {
  Body b(records::kSyncSize);
  b.U32(4, s.type).U32(8, s.context).U32(12, s.stream).U32(16, s.cuda_event);
  b.U32(20, s.correlation).I64(24, s.start_ns).I64(32, s.end_ns);
  AddRawRecord(KindOf(records::Kind::kSync), b.bytes());
}

void PayloadBuilder::AddMarker(const MarkerSpec& m) {
  Body b(records::kMarkerSize);
  b.U32(4, m.pid).U32(8, m.tid).U32(12, m.marker_id).I64(16, m.start_ns).I64(24, m.end_ns);
  b.U32(32, AddString(m.name)).U32(36, AddString(m.domain)).U32(40, m.flags);
  AddRawRecord(KindOf(records::Kind::kMarker), b.bytes());
}

void PayloadBuilder::AddOverhead(const OverheadSpec& o) {
  Body b(records::kOverheadSize);
  b.U32(4, o.overhead_kind).U32(8, o.object_kind);
  b.U32(12, o.object_id[0]).U32(16, o.object_id[1]).U32(20, o.object_id[2]);
  b.I64(24, o.start_ns).I64(32, o.end_ns).U32(40, o.correlation);
  AddRawRecord(KindOf(records::Kind::kOverhead), b.bytes());
}

void PayloadBuilder::AddExternalCorrelation(uint32_t external_kind, uint32_t correlation,
                                            uint64_t external_id) {
  Body b(records::kExternalCorrelationSize);
  b.U32(4, external_kind).U32(8, correlation).U64(16, external_id);
  AddRawRecord(KindOf(records::Kind::kExternalCorrelation), b.bytes());
}

void PayloadBuilder::AddDeviceInfo(const DeviceInfoSpec& d) {
  Body b(records::kDeviceInfoSize);
  b.U32(4, d.device).U32(8, AddString(d.name)).U32(12, d.compute_major).U32(16, d.compute_minor);
  b.U32(20, d.sm_count).U32(24, d.max_threads_per_sm).U32(28, d.max_threads_per_block);
  b.U32(32, d.max_registers_per_sm).U32(36, d.max_registers_per_block);
  b.U32(40, d.max_shared_memory_per_sm).U32(44, d.max_shared_memory_per_block);
  b.U32(48, d.max_blocks_per_sm).U32(52, d.warp_size).U64(56, d.global_memory_bytes);
  b.U64(64, d.global_memory_bandwidth).U32(72, d.l2_cache_bytes).U32(76, d.core_clock_khz);
  AddRawRecord(KindOf(records::Kind::kDeviceInfo), b.bytes());
}

void PayloadBuilder::AddCaptureInfo(const CaptureInfoSpec& c) {
  Body b(records::kCaptureInfoSize);
  b.U32(4, c.flags).U32(8, c.activities).U32(12, c.cupti_version);
  b.U64(16, c.dropped_by_cupti).U64(24, c.dropped_at_cap);
  b.U32(32, AddString(c.message)).U32(36, AddString(c.cupti_path));
  AddRawRecord(KindOf(records::Kind::kCaptureInfo), b.bytes());
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
  std::vector<uint8_t> out(header_size, 0);
  Store32(&out, 0, records::kMagic);
  Store16(&out, 4, major_);
  Store16(&out, 6, minor_);
  Store32(&out, 8, static_cast<uint32_t>(header_size));
  Store32(&out, 12, 0);
  Store64(&out, 16, event_count_);
  Store64(&out, 24, events_offset);
  Store64(&out, 32, events_.size());
  Store64(&out, 40, strings_offset);
  Store64(&out, 48, strings_.size());
  Store64(&out, 56, string_count_);
  Store64(&out, 64, dropped_events_);
  Store64(&out, 72, static_cast<uint64_t>(window_start_ns_));
  Store64(&out, 80, static_cast<uint64_t>(window_end_ns_));
  Store32(&out, 88, static_cast<uint32_t>(pid_));
  Store32(&out, 92, 0);
  out.insert(out.end(), events_.begin(), events_.end());
  out.insert(out.end(), strings_.begin(), strings_.end());
  return out;
}

}  // namespace gpuctl::testing
