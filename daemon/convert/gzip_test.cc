#include "daemon/convert/gzip.h"

#include <zlib.h>

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

// How many gzip members `gz` holds (zlib, one inflate per member).
int CountMembers(const std::string& gz) {
  z_stream zs{};
  EXPECT_EQ(inflateInit2(&zs, 15 + 16), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));  // NOLINT
  zs.avail_in = static_cast<uInt>(gz.size());
  std::string out(1 << 16, '\0');
  int members = 0;
  while (zs.avail_in > 0) {
    zs.next_out = reinterpret_cast<Bytef*>(out.data());  // NOLINT
    zs.avail_out = static_cast<uInt>(out.size());
    int rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      ++members;
      inflateReset(&zs);
    } else if (rc != Z_OK) {
      ADD_FAILURE() << "inflate error " << rc;
      break;
    }
  }
  inflateEnd(&zs);
  return members;
}

// Text with the redundancy of trace JSON, so sizes are meaningful.
std::string TraceLikeText(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::string s;
  s.reserve(n + 200);
  while (s.size() < n) {
    s += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void gemm_";
    s += std::to_string(gen() % 50);
    s += "\", \"ts\": " + std::to_string(gen() % 10000000) + "." + std::to_string(gen() % 1000);
    s += ", \"dur\": " + std::to_string(gen() % 5000) + ", \"args\": {\"correlation\": ";
    s += std::to_string(gen()) + "}},\n";
  }
  s.resize(n);
  return s;
}

// What a reader that inflates only a file's first member gets (catapult's
// chrome://tracing: the header skipped, then one raw inflate): all of it.
std::string FirstMemberOnly(const std::string& gz) {
  z_stream zs{};
  EXPECT_EQ(inflateInit2(&zs, -15), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data() + 10));  // NOLINT
  zs.avail_in = static_cast<uInt>(gz.size() - 10);
  std::string out;
  int rc = Z_OK;
  while (rc == Z_OK) {
    char buffer[1 << 16];
    zs.next_out = reinterpret_cast<Bytef*>(buffer);  // NOLINT
    zs.avail_out = sizeof(buffer);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - zs.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END);
  EXPECT_EQ(zs.avail_in, 8u);  // the trailer is all that follows
  inflateEnd(&zs);
  return out;
}

// Whatever its size and however it is appended, the output is one gzip
// member holding the whole input, even for a reader of the first member
// only; the pieces are joined into one DEFLATE stream.
TEST(GzipTest, OneMemberWhateverTheSize) {
  EXPECT_EQ(CountMembers(*GzipCompress("")), 1);
  EXPECT_EQ(*GzipDecompress(*GzipCompress("")), "");
  EXPECT_EQ(CountMembers(*GzipCompress(TraceLikeText(GzipEncoder::kMemberBytes, 5))), 1);
  // Pieces that straddle piece boundaries, and one larger than a piece.
  std::string input = TraceLikeText(GzipEncoder::kMemberBytes * 2 + 12345, 6);
  auto encoder = GzipEncoder::Create();
  ASSERT_TRUE(encoder.ok());
  absl::string_view rest(input);
  for (size_t piece : {size_t{1000}, GzipEncoder::kMemberBytes + 7, size_t{300000}}) {
    ASSERT_TRUE((*encoder)->Append(rest.substr(0, piece)).ok());
    rest.remove_prefix(piece);
  }
  ASSERT_TRUE((*encoder)->Append(rest).ok());
  ASSERT_TRUE((*encoder)->Finish().ok());
  const std::string& out = (*encoder)->output();
  EXPECT_EQ(CountMembers(out), 1);
  EXPECT_EQ(*GzipDecompress(out), input);
  EXPECT_EQ(FirstMemberOnly(out), input);
}

// Pieces whose DEFLATE streams end in every way (stored, fixed or dynamic
// final blocks, their last byte with few or many unused bits, at each
// level) join into a stream zlib reads back whole, with the right CRC and
// size.
TEST(GzipTest, JoinsStreamsWhateverTheirLastByte) {
  std::mt19937_64 gen(11);
  for (int level : {0, 1, 5, 9}) {
    for (int round = 0; round < 12; ++round) {
      auto encoder = GzipEncoder::Create(level);
      ASSERT_TRUE(encoder.ok());
      std::string input;
      for (int piece = 0; piece < 3; ++piece) {
        // Text, random bytes (stored blocks) or a short tail.
        std::string part;
        const size_t kind = gen() % 3;
        if (kind == 0) part = TraceLikeText(GzipEncoder::kMemberBytes, round + piece);
        if (kind == 1) {
          part.resize(GzipEncoder::kMemberBytes);
          for (char& c : part) c = static_cast<char>(gen());
        }
        if (kind == 2) part = TraceLikeText(GzipEncoder::kMemberBytes, 99).substr(0, gen() % 2000);
        part.resize(GzipEncoder::kMemberBytes, 'x');  // one piece each
        input += part;
      }
      input += std::string(gen() % 100, 'y');
      ASSERT_TRUE((*encoder)->Append(input).ok());
      ASSERT_TRUE((*encoder)->Finish().ok());
      const std::string& out = (*encoder)->output();
      ASSERT_EQ(CountMembers(out), 1) << level << " " << round;
      ASSERT_EQ(*GzipDecompress(out), input) << level << " " << round;
      ASSERT_EQ(FirstMemberOnly(out), input) << level << " " << round;
    }
  }
}

// The stored traces were zlib level 6 before libdeflate: the default level
// must stay within 5 % of that size.
TEST(GzipTest, DefaultLevelWithinFivePercentOfZlibLevel6) {
  std::string input = TraceLikeText(GzipEncoder::kMemberBytes + (1 << 20), 7);
  uLongf bound = compressBound(static_cast<uLong>(input.size()));
  std::string zlib_out(bound, '\0');
  z_stream zs{};
  ASSERT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(input.data());  // NOLINT
  zs.avail_in = static_cast<uInt>(input.size());
  zs.next_out = reinterpret_cast<Bytef*>(zlib_out.data());  // NOLINT
  zs.avail_out = static_cast<uInt>(zlib_out.size());
  ASSERT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  size_t zlib_size = zs.total_out;
  deflateEnd(&zs);
  size_t ours = GzipCompress(input)->size();
  EXPECT_LE(static_cast<double>(ours), 1.05 * static_cast<double>(zlib_size))
      << ours << " bytes against zlib's " << zlib_size;
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
