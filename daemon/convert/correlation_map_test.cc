#include "daemon/convert/correlation_map.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace gpuctl::daemon::chrome_internal {
namespace {

TEST(CorrelationMapTest, DenseSpanAndIdsOutsideItBehaveAlike) {
  CorrelationMap<uint64_t> map(100, 199, 100);
  EXPECT_TRUE(map.Emplace(100, 1).second);
  EXPECT_TRUE(map.Emplace(199, 2).second);
  // Outside the span, both sides, and the extremes of the id space.
  EXPECT_TRUE(map.Emplace(99, 3).second);
  EXPECT_TRUE(map.Emplace(1000000, 4).second);
  EXPECT_TRUE(map.Emplace(0, 5).second);
  EXPECT_TRUE(map.Emplace(std::numeric_limits<uint32_t>::max(), 6).second);
  EXPECT_EQ(*map.Find(100), 1u);
  EXPECT_EQ(*map.Find(199), 2u);
  EXPECT_EQ(*map.Find(99), 3u);
  EXPECT_EQ(*map.Find(1000000), 4u);
  EXPECT_EQ(*map.Find(0), 5u);
  EXPECT_EQ(*map.Find(std::numeric_limits<uint32_t>::max()), 6u);
  EXPECT_EQ(map.Find(150), nullptr);
  EXPECT_EQ(map.Find(200), nullptr);
  EXPECT_FALSE(map.Contains(101));
}

TEST(CorrelationMapTest, EmplaceKeepsTheFirstValueAndReturnsIt) {
  CorrelationMap<uint64_t> map(1, 10, 10);
  EXPECT_TRUE(map.Emplace(5, 50).second);
  auto [value, inserted] = map.Emplace(5, 51);
  EXPECT_FALSE(inserted);
  EXPECT_EQ(*value, 50u);
  *value = 52;
  EXPECT_EQ(*map.Find(5), 52u);
  auto [far, far_inserted] = map.Emplace(500000, 1);
  EXPECT_TRUE(far_inserted);
  EXPECT_FALSE(map.Emplace(500000, 2).second);
  EXPECT_EQ(*far, 1u);
}

TEST(CorrelationMapTest, ASparseOrEmptySpanHashesEverything) {
  // A forged payload: two ids four billion apart must not allocate the span.
  CorrelationMap<uint8_t> sparse(1, std::numeric_limits<uint32_t>::max(), 2);
  EXPECT_TRUE(sparse.Emplace(1, 1).second);
  EXPECT_TRUE(sparse.Emplace(std::numeric_limits<uint32_t>::max(), 1).second);
  EXPECT_TRUE(sparse.Contains(1));
  EXPECT_FALSE(sparse.Contains(2));
  CorrelationMap<uint8_t> empty(1, 0, 0);
  EXPECT_TRUE(empty.Emplace(7, 1).second);
  EXPECT_TRUE(empty.Contains(7));
  CorrelationMap<uint8_t> unset;
  EXPECT_FALSE(unset.Contains(0));
}

}  // namespace
}  // namespace gpuctl::daemon::chrome_internal
