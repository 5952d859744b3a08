#include "daemon/convert/record_reader.h"

#include <algorithm>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/convert/record_decode.h"
#include "gpuctl/v1/record_codec.h"

namespace gpuctl::daemon {
namespace {

namespace rec = ::gpuctl::records;
using record_decode::CheckInterval;
using record_decode::CheckString;
using record_decode::CheckTimestamp;
using record_decode::Invalid;
using record_decode::Limits;

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
    uint32_t len = 0;
    rec::LoadField(base + pos, &len);
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

// Decodes a record of kind R and hands it to R's Accept.
template <typename R>
absl::Status ReadAs(uint64_t index, const uint8_t* p, uint16_t size, Limits limits,
                    DecodedRecords* out) {
  std::optional<R> r = rec::DecodeRecord<R>(p, size);
  if (!r.has_value()) {
    return record_decode::TooSmall(index, static_cast<uint16_t>(rec::Layout<R>::kKind), size,
                                   rec::Layout<R>::kMinSize);
  }
  return record_decode::Accept(index, *r, limits, out);
}

absl::Status ReadRecord(uint64_t index, uint16_t kind, const uint8_t* p, uint16_t size,
                        Limits limits, DecodedRecords* out) {
  switch (static_cast<rec::Kind>(kind)) {
#define GPUCTL_READ_KIND_(Name, kind_, min_size) \
  case rec::Kind::kind_:                         \
    return ReadAs<rec::Name##Record>(index, p, size, limits, out);
    GPUCTL_RECORD_KINDS(GPUCTL_READ_KIND_)
#undef GPUCTL_READ_KIND_
  }
  ++out->unknown_records;
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
    uint16_t kind = 0;
    uint16_t size = 0;
    rec::LoadField(base + pos, &kind);
    rec::LoadField(base + pos + 2, &size);
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

namespace record_decode {

absl::Status Accept(uint64_t index, const RangeRecord& r, Limits limits, DecodedRecords* out) {
  if (auto st = CheckString(index, r.name, *out); !st.ok()) return st;
  if (auto st = CheckInterval(index, "range", r.start_ns, r.end_ns, limits); !st.ok()) return st;
  out->ranges.push_back(r);
  return absl::OkStatus();
}

absl::Status Accept(uint64_t index, const StepRecord& s, Limits limits, DecodedRecords* out) {
  if (auto st = CheckTimestamp(index, "step", s.ts_ns, limits); !st.ok()) return st;
  out->steps.push_back(s);
  return absl::OkStatus();
}

absl::Status Accept(uint64_t index, const ThreadNameRecord& t, Limits limits, DecodedRecords* out) {
  if (auto st = CheckString(index, t.name, *out); !st.ok()) return st;
  out->thread_names.push_back(t);
  return absl::OkStatus();
}

}  // namespace record_decode

absl::StatusOr<DecodedRecords> ReadRecords(absl::Span<const uint8_t> payload,
                                           const RecordReaderOptions& options) {
  const uint64_t size = payload.size();
  if (size < rec::kHeaderSize) {
    return Invalid("payload of ", size, " bytes is shorter than the ", rec::kHeaderSize,
                   "-byte header");
  }
  const rec::PayloadHeader h = rec::DecodeHeader(payload.data());
  if (h.magic != rec::kMagic) return Invalid("bad magic 0x", absl::Hex(h.magic));
  if (h.version_major != rec::kVersionMajor) {
    return Invalid("record format version ", h.version_major, " is not supported (expected ",
                   rec::kVersionMajor, ")");
  }
  const uint32_t header_size = h.header_size;
  if (header_size < rec::kHeaderSize || header_size > size) {
    return Invalid("header size ", header_size, " is outside [", rec::kHeaderSize, ", ", size, "]");
  }
  DecodedRecords out;
  out.version_minor = h.version_minor;
  out.event_count = h.event_count;
  Section events{h.events_offset, h.events_size};
  Section strings{h.strings_offset, h.strings_size};
  uint64_t string_count = h.string_count;
  out.dropped_events = h.dropped_events;
  out.window_start_ns = h.window_start_ns;
  out.window_end_ns = h.window_end_ns;
  out.pid = h.pid;

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
