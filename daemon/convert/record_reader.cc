#include "daemon/convert/record_reader.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/convert/record_decode.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::daemon {
namespace {

namespace rec = ::gpuctl::records;
using record_decode::CheckInterval;
using record_decode::CheckString;
using record_decode::CheckTimestamp;
using record_decode::Invalid;
using record_decode::Limits;
using record_decode::Load16;
using record_decode::Load32;
using record_decode::Load64;
using record_decode::LoadI32;
using record_decode::LoadI64;

struct Section {
  uint64_t offset;
  uint64_t size;
};

absl::Status CheckSection(absl::string_view name, Section s, uint64_t header_size,
                          uint64_t payload_size) {
  if (s.offset > payload_size || s.size > payload_size - s.offset) {
    return Invalid(name, " section [", s.offset, ", +", s.size,
                   ") runs past the end of the payload of ", payload_size);
  }
  if (s.size > 0 && s.offset < header_size) {
    return Invalid(name, " section at offset ", s.offset, " overlaps the header of ", header_size,
                   " bytes");
  }
  return absl::OkStatus();
}

absl::Status ReadStrings(absl::Span<const uint8_t> payload, Section s, uint64_t count,
                         DecodedRecords* out) {
  // Each string takes at least its 4-byte length.
  if (count > s.size / 4) {
    return Invalid("string count ", count, " does not fit the string section of ", s.size,
                   " bytes");
  }
  out->strings.reserve(count);
  const uint8_t* base = payload.data() + s.offset;
  uint64_t pos = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (s.size - pos < 4) return Invalid("string ", i, ": length runs past the string section");
    uint32_t len = Load32(base + pos);
    pos += 4;
    if (len > rec::kMaxStringLength) {
      return Invalid("string ", i, ": length ", len, " exceeds the maximum of ",
                     rec::kMaxStringLength);
    }
    uint64_t padded = (static_cast<uint64_t>(len) + 3) & ~uint64_t{3};
    if (padded > s.size - pos) {
      return Invalid("string ", i, ": ", len, " bytes run past the string section");
    }
    out->strings.emplace_back(reinterpret_cast<const char*>(base + pos), len);  // NOLINT
    pos += padded;
  }
  return absl::OkStatus();
}

absl::Status ReadRecord(uint64_t index, uint16_t kind, const uint8_t* p, uint16_t size,
                        Limits limits, DecodedRecords* out) {
  auto too_small = [&](uint16_t min) { return record_decode::TooSmall(index, kind, size, min); };
  switch (static_cast<rec::Kind>(kind)) {
    case rec::Kind::kRange: {
      if (size < rec::kRangeSize) return too_small(rec::kRangeSize);
      RangeRecord r{Load32(p + 4),  LoadI64(p + 8), LoadI64(p + 16),
                    Load32(p + 24), Load32(p + 28), Load64(p + 32)};
      if (auto st = CheckString(index, r.name, *out); !st.ok()) return st;
      if (auto st = CheckInterval(index, "range", r.start_ns, r.end_ns, limits); !st.ok()) {
        return st;
      }
      out->ranges.push_back(r);
      return absl::OkStatus();
    }
    case rec::Kind::kStep: {
      if (size < rec::kStepSize) return too_small(rec::kStepSize);
      StepRecord s{Load32(p + 4), LoadI64(p + 8), Load64(p + 16)};
      if (auto st = CheckTimestamp(index, "step", s.ts_ns, limits); !st.ok()) {
        return st;
      }
      out->steps.push_back(s);
      return absl::OkStatus();
    }
    case rec::Kind::kThreadName: {
      if (size < rec::kThreadNameSize) return too_small(rec::kThreadNameSize);
      ThreadNameRecord t{Load32(p + 4), Load32(p + 8)};
      if (auto st = CheckString(index, t.name, *out); !st.ok()) return st;
      out->thread_names.push_back(t);
      return absl::OkStatus();
    }
    default:
      break;
  }
  bool known = true;
  if (auto st = record_decode::ReadGpuRecord(index, kind, p, size, limits, out, &known); !st.ok()) {
    return st;
  }
  if (!known) ++out->unknown_records;
  return absl::OkStatus();
}

absl::Status ReadEvents(absl::Span<const uint8_t> payload, Section s, uint64_t count, Limits limits,
                        DecodedRecords* out) {
  if (count > s.size / rec::kRecordPrefixSize) {
    return Invalid("event count ", count, " does not fit the event section of ", s.size, " bytes");
  }
  const uint8_t* base = payload.data() + s.offset;
  uint64_t pos = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (s.size - pos < rec::kRecordPrefixSize) {
      return Invalid("record ", i, ": runs past the event section (event count ", count, ")");
    }
    uint16_t kind = Load16(base + pos);
    uint16_t size = Load16(base + pos + 2);
    if (size < rec::kRecordPrefixSize || size % 4 != 0) {
      return Invalid("record ", i, ": size ", size, " is not a multiple of 4 of at least 4");
    }
    if (size > s.size - pos) {
      return Invalid("record ", i, ": size ", size, " runs past the event section");
    }
    if (auto st = ReadRecord(i, kind, base + pos, size, limits, out); !st.ok()) return st;
    pos += size;
  }
  if (pos != s.size) {
    return Invalid("event section has ", s.size - pos, " bytes after the last of ", count,
                   " records");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DecodedRecords> ReadRecords(absl::Span<const uint8_t> payload,
                                           const RecordReaderOptions& options) {
  const uint64_t size = payload.size();
  if (size < rec::kHeaderSize) {
    return Invalid("payload of ", size, " bytes is shorter than the ", rec::kHeaderSize,
                   "-byte header");
  }
  const uint8_t* h = payload.data();
  if (Load32(h) != rec::kMagic) return Invalid("bad magic 0x", absl::Hex(Load32(h)));
  uint16_t major = Load16(h + 4);
  if (major != rec::kVersionMajor) {
    return Invalid("record format version ", major, " is not supported (expected ",
                   rec::kVersionMajor, ")");
  }
  uint32_t header_size = Load32(h + 8);
  if (header_size < rec::kHeaderSize || header_size > size) {
    return Invalid("header size ", header_size, " is outside [", rec::kHeaderSize, ", ", size, "]");
  }
  DecodedRecords out;
  out.version_minor = Load16(h + 6);
  out.event_count = Load64(h + 16);
  Section events{Load64(h + 24), Load64(h + 32)};
  Section strings{Load64(h + 40), Load64(h + 48)};
  uint64_t string_count = Load64(h + 56);
  out.dropped_events = Load64(h + 64);
  out.window_start_ns = LoadI64(h + 72);
  out.window_end_ns = LoadI64(h + 80);
  out.pid = LoadI32(h + 88);

  if (out.pid != options.expected_pid) {
    return Invalid("payload pid ", out.pid, " is not the sender's pid ", options.expected_pid);
  }
  if (out.window_end_ns < out.window_start_ns) {
    return Invalid("window ends at ", out.window_end_ns, " ns before it starts at ",
                   out.window_start_ns, " ns");
  }
  constexpr int64_t kMaxWindowNs = int64_t{1} << 62;
  if (out.window_start_ns < 0 || out.window_end_ns > kMaxWindowNs) {
    return Invalid("window [", out.window_start_ns, ", ", out.window_end_ns,
                   "] ns is outside [0, 2^62] ns");
  }
  if (out.window_end_ns - out.window_start_ns > absl::ToInt64Nanoseconds(options.max_window)) {
    return Invalid("window of ", out.window_end_ns - out.window_start_ns,
                   " ns is longer than the maximum of ", absl::FormatDuration(options.max_window));
  }
  if (auto st = CheckSection("event", events, header_size, size); !st.ok()) return st;
  if (auto st = CheckSection("string", strings, header_size, size); !st.ok()) return st;
  if (events.size > 0 && strings.size > 0 && events.offset < strings.offset + strings.size &&
      strings.offset < events.offset + events.size) {
    return Invalid("event and string sections overlap");
  }

  // Clamped so the limits stay far from int64 overflow.
  int64_t slack =
      std::clamp<int64_t>(absl::ToInt64Nanoseconds(options.timestamp_slack), 0, kMaxWindowNs / 4);
  Limits limits{out.window_start_ns - slack, out.window_end_ns + slack};

  if (auto st = ReadStrings(payload, strings, string_count, &out); !st.ok()) return st;
  if (auto st = ReadEvents(payload, events, out.event_count, limits, &out); !st.ok()) return st;
  return out;
}

}  // namespace gpuctl::daemon
