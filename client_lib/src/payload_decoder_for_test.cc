#include "client_lib/src/payload_decoder_for_test.h"

#include "gpuctl/v1/records.h"

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

// Size, string fields and time fields of each GPU kind (records.h).
struct GpuLayout {
  records::Kind kind;
  uint16_t size;
  int name_off;    // -1: none
  int domain_off;  // -1: none
  int start_off;   // -1: untimed
  int end_off;
};

constexpr GpuLayout kGpuLayouts[] = {
    {records::Kind::kKernel, records::kKernelSize, 20, -1, 24, 32},
    {records::Kind::kMemcpy, records::kMemcpySize, -1, -1, 24, 32},
    {records::Kind::kMemset, records::kMemsetSize, -1, -1, 24, 32},
    {records::Kind::kApiCall, records::kApiCallSize, 40, -1, 24, 32},
    {records::Kind::kSync, records::kSyncSize, -1, -1, 24, 32},
    {records::Kind::kMarker, records::kMarkerSize, 32, 36, 16, 24},
    {records::Kind::kOverhead, records::kOverheadSize, -1, -1, 24, 32},
    {records::Kind::kExternalCorrelation, records::kExternalCorrelationSize, -1, -1, -1, -1},
    {records::Kind::kDeviceInfo, records::kDeviceInfoSize, 8, -1, -1, -1},
    {records::Kind::kCaptureInfo, records::kCaptureInfoSize, 32, 36, -1, -1},
};

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
  if (b.size() < records::kHeaderSize || LoadU32(b, 0) != records::kMagic) return std::nullopt;
  DecodedPayload p;
  p.version_major = LoadU16(b, 4);
  p.version_minor = LoadU16(b, 6);
  if (LoadU32(b, 8) != records::kHeaderSize || LoadU32(b, 12) != 0) return std::nullopt;
  const uint64_t event_count = LoadU64(b, 16);
  const uint64_t events_offset = LoadU64(b, 24);
  const uint64_t events_size = LoadU64(b, 32);
  const uint64_t strings_offset = LoadU64(b, 40);
  const uint64_t strings_size = LoadU64(b, 48);
  const uint64_t string_count = LoadU64(b, 56);
  p.dropped_events = LoadU64(b, 64);
  p.window_start_ns = static_cast<int64_t>(LoadU64(b, 72));
  p.window_end_ns = static_cast<int64_t>(LoadU64(b, 80));
  p.pid = static_cast<int32_t>(LoadU32(b, 88));
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
      case records::Kind::kRange:
        if (size != records::kRangeSize) return std::nullopt;
        e.tid = LoadU32(b, off + 4);
        e.start_ns = static_cast<int64_t>(LoadU64(b, off + 8));
        e.end_ns = static_cast<int64_t>(LoadU64(b, off + 16));
        name = string_at(LoadU32(b, off + 24));
        e.depth = LoadU32(b, off + 28);
        e.range_id = LoadU64(b, off + 32);
        break;
      case records::Kind::kStep:
        if (size != records::kStepSize) return std::nullopt;
        e.tid = LoadU32(b, off + 4);
        e.start_ns = static_cast<int64_t>(LoadU64(b, off + 8));
        e.step = LoadU64(b, off + 16);
        name = "";
        break;
      case records::Kind::kThreadName:
        if (size != records::kThreadNameSize) return std::nullopt;
        e.tid = LoadU32(b, off + 4);
        name = string_at(LoadU32(b, off + 8));
        break;
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
