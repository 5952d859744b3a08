#ifndef GPUCTL_DAEMON_CORE_TESTING_VECTOR_PAYLOAD_H_
#define GPUCTL_DAEMON_CORE_TESTING_VECTOR_PAYLOAD_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "daemon/core/peer_channel.h"

namespace gpuctl::testing {

// A Payload owning its bytes.
class VectorPayload final : public daemon::Payload {
 public:
  explicit VectorPayload(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  absl::Span<const uint8_t> bytes() const override { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace gpuctl::testing

#endif  // GPUCTL_DAEMON_CORE_TESTING_VECTOR_PAYLOAD_H_
