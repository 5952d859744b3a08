// Test-only decoder of the GPCR payload: the records are read with the
// decoder of proto/gpuctl/v1/record_codec.h, every size, offset and string
// index is checked, and each record must be exactly its kind's size.
#ifndef GPUCTL_CLIENT_LIB_SRC_PAYLOAD_DECODER_FOR_TEST_H_
#define GPUCTL_CLIENT_LIB_SRC_PAYLOAD_DECODER_FOR_TEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuctl::client::testing {

uint16_t LoadU16(std::string_view b, size_t off);
uint32_t LoadU32(std::string_view b, size_t off);
uint64_t LoadU64(std::string_view b, size_t off);

struct DecodedEvent {
  uint16_t kind = 0;
  uint32_t tid = 0;
  int64_t start_ns = 0;  // ts for steps
  int64_t end_ns = 0;
  std::string name;  // range or thread name
  uint32_t depth = 0;
  uint64_t range_id = 0;
  uint64_t step = 0;
  // GPU kinds: the whole record, read with U32/U64 at the offsets of
  // records.h; `name` holds the kind's main string (kernel, API, marker,
  // device name; kCaptureInfo message) and start_ns/end_ns its times.
  std::string raw;
  std::string domain;  // kMarker domain; kCaptureInfo cupti_path
  uint32_t U32(size_t off) const;
  uint64_t U64(size_t off) const;
  int64_t I64(size_t off) const { return static_cast<int64_t>(U64(off)); }
};

struct DecodedPayload {
  uint16_t version_major = 0;
  uint16_t version_minor = 0;
  uint64_t dropped_events = 0;
  int64_t window_start_ns = 0;
  int64_t window_end_ns = 0;
  int32_t pid = 0;
  std::vector<std::string> strings;
  std::vector<DecodedEvent> events;

  std::vector<DecodedEvent> Ranges(std::string_view name) const;
  std::vector<DecodedEvent> OfKind(uint16_t kind) const;
};

// nullopt when anything is out of bounds or inconsistent.
std::optional<DecodedPayload> DecodePayload(std::string_view bytes);

}  // namespace gpuctl::client::testing

#endif  // GPUCTL_CLIENT_LIB_SRC_PAYLOAD_DECODER_FOR_TEST_H_
