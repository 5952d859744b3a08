#ifndef GPUCTL_DAEMON_STORE_RETENTION_H_
#define GPUCTL_DAEMON_STORE_RETENTION_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gpuctl::daemon {

// How much the local trace store keeps; the oldest traces go first.
struct RetentionPolicy {
  uint64_t max_bytes = 0;                         // 0: unlimited
  absl::Duration max_age = absl::ZeroDuration();  // 0: unlimited
  uint64_t max_count = 0;                         // 0: unlimited
};

// True when no limit is set.
bool IsUnlimited(const RetentionPolicy& policy);
// "max_bytes=1073741824 max_age=720h max_count=100000", "unlimited".
std::string DescribeRetention(const RetentionPolicy& policy);

// What the local store keeps unless told otherwise.
inline constexpr RetentionPolicy kDefaultRetention = {
    .max_bytes = uint64_t{50} << 30, .max_age = absl::Hours(24 * 30), .max_count = 100000};

enum class EvictionReason { kMaxAge, kMaxCount, kMaxBytes };
// "max_age", "max_count", "max_bytes": the limit that evicted a trace.
absl::string_view EvictionReasonName(EvictionReason reason);

// Decides which traces a policy evicts. The store offers its traces oldest
// first, including those it may not delete; the planner tracks the totals
// as if the ones the store evicts were gone. Not thread-safe; one per pass.
class RetentionPlanner {
 public:
  // `count` and `bytes`: the store's totals before this pass (the store
  // counts its complete traces, and the bytes of all).
  RetentionPlanner(const RetentionPolicy& policy, absl::Time now, uint64_t count, uint64_t bytes);

  // The limit the store is over while a trace created at `created` is kept,
  // checked in this order: age, count, bytes. nullopt: within every limit,
  // and since traces come oldest first, so is every newer trace (stop).
  std::optional<EvictionReason> Over(absl::Time created) const;
  // Takes an evicted trace of `bytes` off the totals.
  void Evicted(uint64_t bytes);

  uint64_t count() const { return count_; }
  uint64_t bytes() const { return bytes_; }

 private:
  RetentionPolicy policy_;
  absl::Time now_;
  uint64_t count_;
  uint64_t bytes_;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_STORE_RETENTION_H_
