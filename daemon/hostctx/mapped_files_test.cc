#include "daemon/hostctx/mapped_files.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpuctl::hostctx {
namespace {

Mapping MappingOf(uint64_t start, uint64_t end, const std::string& path) {
  Mapping mapping;
  mapping.start = start;
  mapping.end = end;
  mapping.path = path;
  return mapping;
}

TEST(LiveMappingsTest, AMappingReplacesWhatItOverlapsAndTheRestIsSorted) {
  const std::vector<Mapping> live = LiveMappings({
      MappingOf(0x3000, 0x5000, "/old"), MappingOf(0x1000, 0x2000, "/a"),
      MappingOf(0x4000, 0x6000, "/new"),  // over the end of /old
      MappingOf(0x1000, 0x2000, "/a"),    // the same again
  });
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[0].path, "/a");
  EXPECT_EQ(live[1].path, "/new");
  EXPECT_EQ(live[1].start, 0x4000u);
}

TEST(LiveMappingsTest, SameFileComparesPathDeviceAndInode) {
  Mapping a = MappingOf(0x1000, 0x2000, "/lib.so");
  Mapping b = MappingOf(0x2000, 0x3000, "/lib.so");
  EXPECT_TRUE(SameFile(a, b));
  b.inode = 7;
  EXPECT_FALSE(SameFile(a, b));
}

}  // namespace
}  // namespace gpuctl::hostctx
