#ifndef GPUCTL_DAEMON_IPC_PAYLOAD_H_
#define GPUCTL_DAEMON_IPC_PAYLOAD_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "daemon/core/peer_channel.h"

namespace gpuctl::daemon {

// A payload received inline, reassembled into an owned buffer.
// `on_destroy`, when set, runs after the buffer is freed, on whatever
// thread destroys the payload (the core may drop it on a worker).
// `ingest_id` is the ingest entry that counts its bytes (Payload::ingest_id).
class BufferPayload final : public Payload {
 public:
  explicit BufferPayload(std::vector<uint8_t> bytes,
                         absl::AnyInvocable<void()> on_destroy = nullptr, uint64_t ingest_id = 0)
      : bytes_(std::move(bytes)), on_destroy_(std::move(on_destroy)), ingest_id_(ingest_id) {}
  ~BufferPayload() override {
    std::vector<uint8_t>().swap(bytes_);
    if (on_destroy_) on_destroy_();
  }
  BufferPayload(const BufferPayload&) = delete;
  BufferPayload& operator=(const BufferPayload&) = delete;
  absl::Span<const uint8_t> bytes() const override { return bytes_; }
  uint64_t ingest_id() const override { return ingest_id_; }

 private:
  std::vector<uint8_t> bytes_;
  absl::AnyInvocable<void()> on_destroy_;
  uint64_t ingest_id_;
};

// Validates a memfd received from an untrusted peer and maps it read-only.
// Takes ownership of `fd` and always closes it (the mapping, if any, stays
// valid without it). Refuses (INVALID_ARGUMENT, with the reason) anything
// that is not a regular file sealed against shrink, grow and write, whose
// size is exactly `expected_size`, or whose size exceeds `max_size`. The
// seals make the bytes immutable for the mapping's lifetime, so the producer
// cannot change them under the consumer, nor truncate the file to fault it.
absl::StatusOr<std::unique_ptr<Payload>> MapSealedMemfd(int fd, uint64_t expected_size,
                                                        uint64_t max_size);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_IPC_PAYLOAD_H_
