#include "daemon/store/retention.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpuctl::daemon {

bool IsUnlimited(const RetentionPolicy& policy) {
  return policy.max_bytes == 0 && policy.max_age <= absl::ZeroDuration() && policy.max_count == 0;
}

std::string DescribeRetention(const RetentionPolicy& policy) {
  std::vector<std::string> parts;
  if (policy.max_bytes > 0) parts.push_back(absl::StrCat("max_bytes=", policy.max_bytes));
  if (policy.max_age > absl::ZeroDuration()) {
    parts.push_back(absl::StrCat("max_age=", absl::FormatDuration(policy.max_age)));
  }
  if (policy.max_count > 0) parts.push_back(absl::StrCat("max_count=", policy.max_count));
  return parts.empty() ? "unlimited" : absl::StrJoin(parts, " ");
}

absl::string_view EvictionReasonName(EvictionReason reason) {
  switch (reason) {
    case EvictionReason::kMaxAge:
      return "max_age";
    case EvictionReason::kMaxCount:
      return "max_count";
    case EvictionReason::kMaxBytes:
      return "max_bytes";
  }
  return "unknown";
}

RetentionPlanner::RetentionPlanner(const RetentionPolicy& policy, absl::Time now, uint64_t count,
                                   uint64_t bytes)
    : policy_(policy), now_(now), count_(count), bytes_(bytes) {}

std::optional<EvictionReason> RetentionPlanner::Over(absl::Time created) const {
  if (policy_.max_age > absl::ZeroDuration() && now_ - created > policy_.max_age) {
    return EvictionReason::kMaxAge;
  }
  if (policy_.max_count > 0 && count_ > policy_.max_count) return EvictionReason::kMaxCount;
  if (policy_.max_bytes > 0 && bytes_ > policy_.max_bytes) return EvictionReason::kMaxBytes;
  return std::nullopt;
}

void RetentionPlanner::Evicted(uint64_t bytes) {
  if (count_ > 0) --count_;
  bytes_ -= std::min(bytes_, bytes);
}

}  // namespace gpuctl::daemon
