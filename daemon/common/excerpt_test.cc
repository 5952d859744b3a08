#include "daemon/common/excerpt.h"

#include <string>

#include "gtest/gtest.h"

namespace gpuctl {
namespace {

TEST(ExcerptTest, ShortTextIsQuotedWhole) {
  EXPECT_EQ(Excerpt("abc", 3), "abc");
  EXPECT_EQ(Excerpt(""), "");
}

TEST(ExcerptTest, LongTextIsCutAndSaysHowLongItWas) {
  EXPECT_EQ(Excerpt(std::string(10240, 'x'), 4), "xxxx... (10240 bytes)");
  EXPECT_LE(Excerpt(std::string(10240, 'x')).size(), kExcerptBytes + 32);
}

TEST(ExcerptTest, NeverCutsInsideAUtf8Character) {
  // "ééé": three 2-byte characters; 3 bytes hold one and a half.
  EXPECT_EQ(Excerpt("\xc3\xa9\xc3\xa9\xc3\xa9", 3), "\xc3\xa9... (6 bytes)");
  // A 4-byte character cut after any of its bytes goes whole.
  const std::string emoji = "a\xf0\x9f\x98\x80z";
  EXPECT_EQ(Excerpt(emoji, 2), "a... (6 bytes)");
  EXPECT_EQ(Excerpt(emoji, 4), "a... (6 bytes)");
  EXPECT_EQ(Excerpt(emoji, 5), "a\xf0\x9f\x98\x80... (6 bytes)");
}

TEST(ExcerptTest, BytesThatAreNotUtf8AreCutAnywhere) {
  EXPECT_EQ(Excerpt(std::string(8, '\x80'), 5), std::string(5, '\x80') + "... (8 bytes)");
}

TEST(ClampMessageTest, KeepsShortMessagesAndBoundsLongOnes) {
  EXPECT_EQ(ClampMessage("fine"), "fine");
  const std::string clamped = ClampMessage(std::string(5000, 'm'));
  EXPECT_LE(clamped.size(), kMaxStatusMessageBytes);
  EXPECT_NE(clamped.find("(5000 bytes)"), std::string::npos);
  EXPECT_EQ(ClampMessage(std::string(100, 'm'), 4), "... (100 bytes)");
}

}  // namespace
}  // namespace gpuctl
