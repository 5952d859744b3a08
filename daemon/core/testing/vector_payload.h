#ifndef GPUCTL_DAEMON_CORE_TESTING_VECTOR_PAYLOAD_H_
#define GPUCTL_DAEMON_CORE_TESTING_VECTOR_PAYLOAD_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "daemon/core/peer_channel.h"

namespace gpuctl::testing {

// A Payload owning its bytes; with `ingest_id`, one admitted already (as
// the IPC server hands on an inline payload).
class VectorPayload final : public daemon::Payload {
 public:
  explicit VectorPayload(std::vector<uint8_t> bytes, uint64_t ingest_id = 0)
      : bytes_(std::move(bytes)), ingest_id_(ingest_id) {}
  absl::Span<const uint8_t> bytes() const override { return bytes_; }
  uint64_t ingest_id() const override { return ingest_id_; }

 private:
  std::vector<uint8_t> bytes_;
  uint64_t ingest_id_;
};

}  // namespace gpuctl::testing

#endif  // GPUCTL_DAEMON_CORE_TESTING_VECTOR_PAYLOAD_H_
