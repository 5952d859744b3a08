#include "client_lib/src/payload_decoder_for_test.h"

#include "gpuctl/v1/record_codec.h"

namespace gpuctl::client::testing {

uint16_t LoadU16(std::string_view b, size_t off) {
  return static_cast<uint16_t>(static_cast<uint8_t>(b[off]) |
                               (static_cast<uint8_t>(b[off + 1]) << 8));
}

uint32_t LoadU32(std::string_view b, size_t off) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[off + i]);
  return v;
}

uint64_t LoadU64(std::string_view b, size_t off) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[off + i]);
  return v;
}

uint32_t DecodedEvent::U32(size_t off) const {
  return off + 4 <= raw.size() ? LoadU32(raw, off) : 0;
}
uint64_t DecodedEvent::U64(size_t off) const {
  return off + 8 <= raw.size() ? LoadU64(raw, off) : 0;
}

namespace {

// Size, string fields and time fields of each GPU kind, found by name in
// the field tables of records.h.
struct GpuLayout {
  records::Kind kind;
  uint16_t size;
  int name_off;    // -1: none
  int domain_off;  // -1: none
  int start_off;   // -1: untimed
  int end_off;
};

// An instant (a `ts_ns` field) starts and ends at the same time.
template <typename R>
constexpr GpuLayout LayoutOf(const char* name_field = "", const char* domain_field = "") {
  const int ts = records::OffsetOf<R>("ts_ns");
  return {records::Layout<R>::kKind,
          records::Layout<R>::kSize,
          records::OffsetOf<R>(name_field),
          records::OffsetOf<R>(domain_field),
          ts >= 0 ? ts : records::OffsetOf<R>("start_ns"),
          ts >= 0 ? ts : records::OffsetOf<R>("end_ns")};
}

constexpr GpuLayout kGpuLayouts[] = {
    LayoutOf<records::KernelRecord>("name"),
    LayoutOf<records::MemcpyRecord>(),
    LayoutOf<records::MemsetRecord>(),
    LayoutOf<records::ApiCallRecord>("name"),
    LayoutOf<records::SyncRecord>(),
    LayoutOf<records::MarkerRecord>("name", "domain"),
    LayoutOf<records::OverheadRecord>(),
    LayoutOf<records::ExternalCorrelationRecord>(),
    LayoutOf<records::DeviceInfoRecord>("name"),
    LayoutOf<records::CaptureInfoRecord>("message", "cupti_path"),
    LayoutOf<records::MemoryRecord>(),
    LayoutOf<records::MemoryPoolRecord>(),
};

// The record of kind R at `b[off]`, exactly Layout<R>::kSize bytes long.
template <typename R>
std::optional<R> DecodeExact(std::string_view b, size_t off, uint16_t size) {
  if (size != records::Layout<R>::kSize) return std::nullopt;
  return records::DecodeRecord<R>(reinterpret_cast<const uint8_t*>(b.data()) + off,  // NOLINT
                                  size);
}

}  // namespace

std::vector<DecodedEvent> DecodedPayload::Ranges(std::string_view name) const {
  std::vector<DecodedEvent> out;
  for (const DecodedEvent& e : events) {
    if (e.kind == static_cast<uint16_t>(records::Kind::kRange) && e.name == name) out.push_back(e);
  }
  return out;
}

std::vector<DecodedEvent> DecodedPayload::OfKind(uint16_t kind) const {
  std::vector<DecodedEvent> out;
  for (const DecodedEvent& e : events) {
    if (e.kind == kind) out.push_back(e);
  }
  return out;
}

std::optional<DecodedPayload> DecodePayload(std::string_view b) {
  if (b.size() < records::kHeaderSize) return std::nullopt;
  const records::PayloadHeader h =
      records::DecodeHeader(reinterpret_cast<const uint8_t*>(b.data()));  // NOLINT
  if (h.magic != records::kMagic) return std::nullopt;
  DecodedPayload p;
  p.version_major = h.version_major;
  p.version_minor = h.version_minor;
  if (h.header_size != records::kHeaderSize || h.flags != 0) return std::nullopt;
  const uint64_t event_count = h.event_count;
  const uint64_t events_offset = h.events_offset;
  const uint64_t events_size = h.events_size;
  const uint64_t strings_offset = h.strings_offset;
  const uint64_t strings_size = h.strings_size;
  const uint64_t string_count = h.string_count;
  p.dropped_events = h.dropped_events;
  p.window_start_ns = h.window_start_ns;
  p.window_end_ns = h.window_end_ns;
  p.pid = h.pid;
  if (events_offset != records::kHeaderSize || strings_offset != events_offset + events_size ||
      strings_offset + strings_size != b.size()) {
    return std::nullopt;
  }
  size_t off = strings_offset;
  for (uint64_t i = 0; i < string_count; ++i) {
    if (off + 4 > b.size()) return std::nullopt;
    const uint32_t len = LoadU32(b, off);
    off += 4;
    if (len > records::kMaxStringLength || off + len > b.size()) return std::nullopt;
    p.strings.emplace_back(b.substr(off, len));
    off += (len + 3) / 4 * 4;
  }
  if (off != b.size()) return std::nullopt;
  auto string_at = [&](uint32_t idx) -> std::optional<std::string> {
    if (idx >= p.strings.size()) return std::nullopt;
    return p.strings[idx];
  };
  off = events_offset;
  for (uint64_t i = 0; i < event_count; ++i) {
    if (off + 4 > strings_offset) return std::nullopt;
    DecodedEvent e;
    e.kind = LoadU16(b, off);
    const uint16_t size = LoadU16(b, off + 2);
    if (size < 4 || size % 4 != 0 || off + size > strings_offset) return std::nullopt;
    std::optional<std::string> name;
    switch (static_cast<records::Kind>(e.kind)) {
      case records::Kind::kRange: {
        std::optional<records::RangeRecord> r = DecodeExact<records::RangeRecord>(b, off, size);
        if (!r.has_value()) return std::nullopt;
        e.tid = r->tid;
        e.start_ns = r->start_ns;
        e.end_ns = r->end_ns;
        name = string_at(r->name);
        e.depth = r->depth;
        e.range_id = r->range_id;
        break;
      }
      case records::Kind::kStep: {
        std::optional<records::StepRecord> r = DecodeExact<records::StepRecord>(b, off, size);
        if (!r.has_value()) return std::nullopt;
        e.tid = r->tid;
        e.start_ns = r->ts_ns;
        e.step = r->step;
        name = "";
        break;
      }
      case records::Kind::kThreadName: {
        std::optional<records::ThreadNameRecord> r =
            DecodeExact<records::ThreadNameRecord>(b, off, size);
        if (!r.has_value()) return std::nullopt;
        e.tid = r->tid;
        name = string_at(r->name);
        break;
      }
      default: {
        const GpuLayout* layout = nullptr;
        for (const GpuLayout& l : kGpuLayouts) {
          if (static_cast<uint16_t>(l.kind) == e.kind) layout = &l;
        }
        if (layout == nullptr || size != layout->size) return std::nullopt;
        e.raw = std::string(b.substr(off, size));
        name = "";
        if (layout->name_off >= 0) name = string_at(e.U32(layout->name_off));
        if (layout->domain_off >= 0) {
          std::optional<std::string> domain = string_at(e.U32(layout->domain_off));
          if (!domain.has_value()) return std::nullopt;
          e.domain = *domain;
        }
        if (layout->start_off >= 0) {
          e.start_ns = e.I64(layout->start_off);
          e.end_ns = e.I64(layout->end_off);
          if (e.end_ns < e.start_ns) return std::nullopt;
        }
        break;
      }
    }
    if (!name.has_value()) return std::nullopt;
    e.name = *name;
    p.events.push_back(std::move(e));
    off += size;
  }
  if (off != strings_offset) return std::nullopt;
  return p;
}

}  // namespace gpuctl::client::testing
