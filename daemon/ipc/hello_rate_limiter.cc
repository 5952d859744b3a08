#include "daemon/ipc/hello_rate_limiter.h"

#include <algorithm>

namespace gpuctl::daemon {
namespace {

constexpr absl::Duration kSweepInterval = absl::Seconds(60);

double Refilled(double tokens, absl::Duration elapsed, double per_second, double burst) {
  if (elapsed <= absl::ZeroDuration()) return tokens;
  return std::min(burst, tokens + absl::ToDoubleSeconds(elapsed) * per_second);
}

}  // namespace

bool HelloRateLimiter::TryAcquire(uint32_t uid, absl::Time now) {
  if (per_second_ <= 0) return true;
  if (now - last_sweep_ >= kSweepInterval) ForgetFullBuckets(now);
  auto [it, inserted] = buckets_.try_emplace(uid, Bucket{burst_, now});
  Bucket& bucket = it->second;
  bucket.tokens = Refilled(bucket.tokens, now - bucket.updated, per_second_, burst_);
  bucket.updated = std::max(bucket.updated, now);
  if (bucket.tokens < 1.0) return false;
  bucket.tokens -= 1.0;
  return true;
}

void HelloRateLimiter::ForgetFullBuckets(absl::Time now) {
  last_sweep_ = now;
  absl::erase_if(buckets_, [&](const auto& entry) {
    const Bucket& b = entry.second;
    return Refilled(b.tokens, now - b.updated, per_second_, burst_) >= burst_;
  });
}

}  // namespace gpuctl::daemon
