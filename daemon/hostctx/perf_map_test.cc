#include "daemon/hostctx/perf_map.h"

#include <string>

#include "gtest/gtest.h"

namespace gpuctl::hostctx {
namespace {

TEST(PerfMapTest, FindsTheEntryHoldingAnAddress) {
  const PerfMap map = PerfMap::Parse(
      "7f0000001000 40 py::train_step:/app/train.py\n"
      "0x7f0000002000 0x10 LazyCompile:~main app.js:1\n"
      "7f0000000000 1000 big region\n");
  ASSERT_EQ(map.size(), 3u);
  ASSERT_NE(map.Find(0x7f0000001010), nullptr);
  EXPECT_EQ(map.Find(0x7f0000001010)->name, "py::train_step:/app/train.py");
  EXPECT_EQ(map.Find(0x7f000000200f)->name, "LazyCompile:~main app.js:1");
  EXPECT_EQ(map.Find(0x7f0000000800)->name, "big region");
  EXPECT_EQ(map.Find(0x7f0000002010), nullptr);
  EXPECT_EQ(map.Find(0x1000), nullptr);
}

TEST(PerfMapTest, SkipsLinesThatDoNotParse) {
  const std::string name(2000, 'x');
  const PerfMap map = PerfMap::Parse(
      "garbage\n"
      "zz 10 name\n"
      "1000 0 empty\n"
      "ffffffffffffffff 10 wraps\n"
      "2000 10\n"
      "3000 10 " +
      name +
      "\n"
      "4000 10 ok\r\n");
  ASSERT_EQ(map.size(), 2u);
  EXPECT_EQ(map.Find(0x3000)->name.size(), PerfMap::kMaxNameBytes);
  EXPECT_EQ(map.Find(0x4001)->name, "ok");
}

TEST(PerfMapTest, TheLastEntryAtAnAddressWins) {
  const PerfMap map = PerfMap::Parse("1000 10 old\n1000 10 new\n");
  ASSERT_EQ(map.size(), 1u);
  EXPECT_EQ(map.Find(0x1000)->name, "new");
}

}  // namespace
}  // namespace gpuctl::hostctx
