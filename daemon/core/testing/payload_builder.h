#ifndef GPUCTL_DAEMON_CORE_TESTING_PAYLOAD_BUILDER_H_
#define GPUCTL_DAEMON_CORE_TESTING_PAYLOAD_BUILDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "daemon/core/peer_channel.h"

namespace gpuctl::testing {

// Test-only encoder of the record format (proto/gpuctl/v1/records.h),
// written independently of the reader with explicit little-endian stores.
// Layout: header, event section, string section.
class PayloadBuilder {
 public:
  PayloadBuilder(int32_t pid, int64_t window_start_ns, int64_t window_end_ns);

  // Returns the string's index.
  uint32_t AddString(absl::string_view s);
  void AddRange(uint32_t tid, int64_t start_ns, int64_t end_ns, uint32_t name, uint32_t depth,
                uint64_t range_id);
  // Convenience: interns `name`.
  void AddRange(uint32_t tid, int64_t start_ns, int64_t end_ns, absl::string_view name,
                uint32_t depth, uint64_t range_id);
  void AddStep(uint32_t tid, int64_t ts_ns, uint64_t step);
  void AddThreadName(uint32_t tid, absl::string_view name);
  // Any record: `body` follows the 4-byte prefix; size is computed (padded).
  void AddRawRecord(uint16_t kind, const std::vector<uint8_t>& body);

  void set_dropped_events(uint64_t n) { dropped_events_ = n; }
  void set_version(uint16_t major, uint16_t minor) {
    major_ = major;
    minor_ = minor;
  }
  // Extra header bytes beyond records::kHeaderSize.
  void set_extra_header_bytes(uint32_t n) { extra_header_ = n; }

  std::vector<uint8_t> Build() const;
  uint64_t event_count() const { return event_count_; }

 private:
  int32_t pid_;
  int64_t window_start_ns_;
  int64_t window_end_ns_;
  uint16_t major_;
  uint16_t minor_;
  uint32_t extra_header_ = 0;
  uint64_t dropped_events_ = 0;
  uint64_t event_count_ = 0;
  uint64_t string_count_ = 0;
  std::vector<uint8_t> events_;
  std::vector<uint8_t> strings_;
};

void Store16(std::vector<uint8_t>* out, size_t at, uint16_t v);
void Store32(std::vector<uint8_t>* out, size_t at, uint32_t v);
void Store64(std::vector<uint8_t>* out, size_t at, uint64_t v);

// A Payload owning its bytes.
class VectorPayload final : public daemon::Payload {
 public:
  explicit VectorPayload(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  absl::Span<const uint8_t> bytes() const override { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace gpuctl::testing

#endif  // GPUCTL_DAEMON_CORE_TESTING_PAYLOAD_BUILDER_H_
