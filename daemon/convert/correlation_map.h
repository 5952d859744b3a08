// Internal to the Chrome trace converter. Not a public API.
#ifndef GPUCTL_DAEMON_CONVERT_CORRELATION_MAP_H_
#define GPUCTL_DAEMON_CONVERT_CORRELATION_MAP_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace gpuctl::daemon::chrome_internal {

// CUPTI correlation id -> V. The ids of one capture window are nearly
// consecutive (CUPTI numbers API calls in order), so those inside the span
// given to the constructor index a vector: the converter looks up every GPU
// op's and API call's id, and random probes into a hash table of 100 000
// entries miss the cache on almost every one. Ids outside the span (a
// forged or unusual payload) go to a hash map, so any input works.
template <typename V>
class CorrelationMap {
 public:
  // The dense part covers [lo, hi] when that span is at most
  // kMaxSpanPerEntry times `expected` entries (plus a little); else every
  // id is hashed.
  static constexpr size_t kMaxSpanPerEntry = 4;
  static constexpr size_t kMinDenseSpan = 4096;

  CorrelationMap() = default;
  CorrelationMap(uint32_t lo, uint32_t hi, size_t expected) {
    if (hi < lo) return;
    size_t span = size_t{hi} - lo + 1;
    if (span > kMaxSpanPerEntry * expected + kMinDenseSpan) return;
    base_ = lo;
    dense_.resize(span);
    present_.resize(span, 0);
  }

  // Inserts `value` under `key` unless the key is there; returns the stored
  // value and whether it was inserted.
  std::pair<V*, bool> Emplace(uint32_t key, V value) {
    if (size_t i = key - size_t{base_}; key >= base_ && i < dense_.size()) {
      if (present_[i]) return {&dense_[i], false};
      present_[i] = 1;
      dense_[i] = std::move(value);
      return {&dense_[i], true};
    }
    auto [it, inserted] = sparse_.emplace(key, std::move(value));
    return {&it->second, inserted};
  }

  // The value under `key`, or null.
  const V* Find(uint32_t key) const {
    if (size_t i = key - size_t{base_}; key >= base_ && i < dense_.size()) {
      return present_[i] ? &dense_[i] : nullptr;
    }
    auto it = sparse_.find(key);
    return it == sparse_.end() ? nullptr : &it->second;
  }
  bool Contains(uint32_t key) const { return Find(key) != nullptr; }

 private:
  uint32_t base_ = 0;
  std::vector<V> dense_;
  std::vector<uint8_t> present_;
  absl::flat_hash_map<uint32_t, V> sparse_;
};

}  // namespace gpuctl::daemon::chrome_internal

#endif  // GPUCTL_DAEMON_CONVERT_CORRELATION_MAP_H_
