#include "daemon/convert/gzip.h"

#include <random>
#include <string>

#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(gen());
  return s;
}

TEST(GzipTest, RoundTrips) {
  for (const std::string& input :
       {std::string(), std::string("hello"), std::string(1 << 20, 'a'), RandomBytes(300000, 1)}) {
    auto compressed = GzipCompress(input);
    ASSERT_TRUE(compressed.ok());
    ASSERT_GE(compressed->size(), 18u);
    EXPECT_EQ(static_cast<uint8_t>((*compressed)[0]), 0x1f);  // gzip magic
    EXPECT_EQ(static_cast<uint8_t>((*compressed)[1]), 0x8b);
    auto back = GzipDecompress(*compressed);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, input);
  }
  auto small = GzipCompress(std::string(1 << 20, 'a'));
  EXPECT_LT(small->size(), 10000u);
}

TEST(GzipTest, StreamingEqualsOneShot) {
  std::string input = RandomBytes(1000, 2) + std::string(200000, 'z') + RandomBytes(77777, 3);
  auto encoder = GzipEncoder::Create();
  ASSERT_TRUE(encoder.ok());
  for (size_t i = 0; i < input.size(); i += 4096) {
    ASSERT_TRUE((*encoder)->Append(absl::string_view(input).substr(i, 4096)).ok());
  }
  ASSERT_TRUE((*encoder)->Finish().ok());
  EXPECT_FALSE((*encoder)->Append("x").ok());
  auto back = GzipDecompress((*encoder)->output());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, input);
}

TEST(GzipTest, DecompressesConcatenatedMembers) {
  std::string joined = *GzipCompress("abc") + *GzipCompress("def");
  EXPECT_EQ(*GzipDecompress(joined), "abcdef");
}

TEST(GzipTest, RejectsCorruptTruncatedAndOversized) {
  std::string compressed = *GzipCompress(RandomBytes(10000, 4));
  EXPECT_FALSE(GzipDecompress(compressed.substr(0, compressed.size() / 2)).ok());
  std::string corrupt = compressed;
  corrupt[20] ^= 0x55;
  corrupt[21] ^= 0x55;
  EXPECT_FALSE(GzipDecompress(corrupt).ok());
  EXPECT_FALSE(GzipDecompress("not gzip at all").ok());
  EXPECT_FALSE(GzipDecompress("").ok());
  auto limited = GzipDecompress(*GzipCompress(std::string(1 << 20, 'a')), 1000);
  EXPECT_EQ(limited.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(GzipEncoder::Create(10).ok());
}

}  // namespace
}  // namespace gpuctl::daemon
