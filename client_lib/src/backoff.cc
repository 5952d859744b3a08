#include "client_lib/src/backoff.h"

#include <algorithm>

namespace gpuctl::client {

Backoff::Backoff(int64_t initial_ms, int64_t max_ms, uint64_t seed)
    : initial_ms_(std::max<int64_t>(1, initial_ms)),
      max_ms_(std::max(initial_ms_, max_ms)),
      current_ms_(initial_ms_),
      state_(seed | 1) {}

uint64_t Backoff::NextRandom() {
  // xorshift64*: enough for jitter, and needs nothing from libstdc++'s
  // random_device (which may pull in a newer glibc symbol).
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  return state_ * 0x2545F4914F6CDD1DULL;
}

int64_t Backoff::NextDelayMs() {
  const int64_t base = current_ms_;
  current_ms_ = std::min(max_ms_, current_ms_ * 2);
  const int64_t half = base / 2;
  return half + static_cast<int64_t>(NextRandom() % static_cast<uint64_t>(base - half + 1));
}

}  // namespace gpuctl::client
