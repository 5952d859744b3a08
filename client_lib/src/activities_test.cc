#include "client_lib/src/activities.h"

#include <gtest/gtest.h>

#include "gpuctl/v1/records.h"

namespace gpuctl::client {
namespace {

TEST(ActivitiesTest, EmptyMeansTheDefaultSetWithoutDriver) {
  uint32_t mask = 0;
  std::string unknown;
  ASSERT_TRUE(ParseActivities({}, &mask, &unknown));
  EXPECT_EQ(mask, records::kDefaultActivities);
  EXPECT_EQ(mask & records::kActivityDriver, 0u);
  // Device memory records cost a CUPTI callback per allocation: asked for
  // by name only.
  EXPECT_EQ(mask & records::kActivityMemory, 0u);
  EXPECT_EQ(ActivityNames(mask), "kernel,memcpy,memset,runtime,sync,nvtx,overhead");
}

TEST(ActivitiesTest, NamesMapToBits) {
  uint32_t mask = 0;
  std::string unknown;
  ASSERT_TRUE(ParseActivities({"kernel", "driver", "kernel", "memory"}, &mask, &unknown));
  EXPECT_EQ(mask, records::kActivityKernel | records::kActivityDriver | records::kActivityMemory);
}

TEST(ActivitiesTest, UnknownNameIsReported) {
  uint32_t mask = 0;
  std::string unknown;
  EXPECT_FALSE(ParseActivities({"memcpy", "KERNEL"}, &mask, &unknown));
  EXPECT_EQ(unknown, "KERNEL");
  EXPECT_EQ(KnownActivityNames(), "kernel,memcpy,memset,runtime,driver,sync,nvtx,overhead,memory");
}

}  // namespace
}  // namespace gpuctl::client
