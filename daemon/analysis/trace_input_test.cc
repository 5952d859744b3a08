// TraceInput's gzip: every member's CRC-32 and size are checked (by the
// input itself, not zlib), wherever the trailer falls in the raw buffers.
#include "daemon/analysis/trace_input.h"

#include <zlib.h>

#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::analysis {
namespace {

using ::testing::HasSubstr;

// One gzip member of `data`, stored (level 0): its size follows the input's.
std::string StoredMember(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 0, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));  // NOLINT: zlib's API
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());  // NOLINT: zlib's unsigned bytes
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string Noise(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>('a' + rng() % 26);
  return s;
}

struct Read {
  std::string bytes;
  absl::Status status;
};

Read ReadAll(const std::string& stored) {
  TraceInput input = TraceInput::FromBytes(stored);
  Read r;
  char buf[70000];
  while (size_t n = input.Read(buf, sizeof(buf))) r.bytes.append(buf, n);
  r.status = input.status();
  return r;
}

TEST(TraceInputTest, MembersWhoseTrailerStraddlesARawBufferAreCheckedWhole) {
  // The raw bytes are read 256 KiB at a time: sizes of the first member
  // around that put its 8-byte trailer before, across and after the edge.
  const size_t edge = size_t{256} << 10;
  const std::string second = Noise(1000, 7);
  for (size_t end_offset : {edge - 8, edge - 5, edge - 1, edge, edge + 3, edge + 8}) {
    // Find the input size whose stored member ends at end_offset.
    size_t n = end_offset - 100;
    std::string first_data = Noise(n, 1);
    std::string first = StoredMember(first_data);
    while (first.size() != end_offset) {
      n += end_offset - first.size();
      first_data = Noise(n, 1);
      first = StoredMember(first_data);
    }
    const std::string stored = first + StoredMember(second);
    Read ok = ReadAll(stored);
    ASSERT_TRUE(ok.status.ok()) << end_offset << ": " << ok.status;
    EXPECT_EQ(ok.bytes, first_data + second) << end_offset;

    // The first member's CRC-32 (its trailer's first 4 bytes), then its size.
    for (size_t at : {first.size() - 8, first.size() - 1}) {
      std::string bad = stored;
      bad[at] = static_cast<char>(bad[at] ^ 0x01);
      Read r = ReadAll(bad);
      ASSERT_FALSE(r.status.ok()) << end_offset << " " << at;
      EXPECT_THAT(
          std::string(r.status.message()),
          HasSubstr(at == first.size() - 8 ? "incorrect data check" : "incorrect length check"));
      EXPECT_THAT(std::string(r.status.message()),
                  HasSubstr("corrupt gzip data in the member starting at byte 0"));
    }
    // The second member's trailer is checked too.
    std::string bad = stored;
    bad[stored.size() - 6] = static_cast<char>(bad[stored.size() - 6] ^ 0x10);
    Read r = ReadAll(bad);
    EXPECT_THAT(std::string(r.status.message()),
                HasSubstr("corrupt gzip data in the member starting at byte " +
                          std::to_string(first.size())));
  }
}

}  // namespace
}  // namespace gpuctl::analysis
