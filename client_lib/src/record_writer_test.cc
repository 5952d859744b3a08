#include "client_lib/src/record_writer.h"

#include <gtest/gtest.h>

#include "gpuctl/v1/records.h"

namespace gpuctl::client {
namespace {

uint16_t U16(const std::string& b, size_t off) {
  return static_cast<uint16_t>(static_cast<uint8_t>(b[off]) | static_cast<uint8_t>(b[off + 1])
                                                                  << 8);
}
uint32_t U32(const std::string& b, size_t off) {
  return static_cast<uint32_t>(U16(b, off)) | static_cast<uint32_t>(U16(b, off + 2)) << 16;
}
uint64_t U64(const std::string& b, size_t off) {
  return static_cast<uint64_t>(U32(b, off)) | static_cast<uint64_t>(U32(b, off + 4)) << 32;
}

TEST(RecordWriterTest, EmptyPayloadIsHeaderOnly) {
  RecordWriter writer;
  const std::string p = writer.Finish(
      {.dropped_events = 7, .window_start_ns = 100, .window_end_ns = 200, .pid = 4242});
  ASSERT_EQ(p.size(), records::kHeaderSize);
  // "GPCR" in byte order, whatever the host.
  EXPECT_EQ(p.substr(0, 4), "GPCR");
  EXPECT_EQ(U16(p, 4), records::kVersionMajor);
  EXPECT_EQ(U16(p, 6), records::kVersionMinor);
  EXPECT_EQ(U32(p, 8), records::kHeaderSize);
  EXPECT_EQ(U32(p, 12), 0u);
  EXPECT_EQ(U64(p, 16), 0u);                    // event_count
  EXPECT_EQ(U64(p, 24), records::kHeaderSize);  // events_offset
  EXPECT_EQ(U64(p, 32), 0u);
  EXPECT_EQ(U64(p, 40), records::kHeaderSize);  // strings_offset
  EXPECT_EQ(U64(p, 48), 0u);
  EXPECT_EQ(U64(p, 56), 0u);
  EXPECT_EQ(U64(p, 64), 7u);
  EXPECT_EQ(U64(p, 72), 100u);
  EXPECT_EQ(U64(p, 80), 200u);
  EXPECT_EQ(U32(p, 88), 4242u);
  EXPECT_EQ(U32(p, 92), 0u);
}

TEST(RecordWriterTest, RecordsAndStringsFollowTheLayout) {
  RecordWriter writer;
  const uint32_t fwd = writer.InternString("forward");
  EXPECT_EQ(writer.InternString("forward"), fwd);  // interned once
  const uint32_t thread = writer.InternString("worker");
  writer.AddRange(11, -5, 1'000'000'000'000LL, fwd, 2, 0x1122334455667788ULL);
  writer.AddStep(12, 77, 9);
  writer.AddThreadName(13, thread);
  EXPECT_EQ(writer.event_count(), 3u);
  const uint64_t expected_size = writer.PayloadSize();
  const std::string p = writer.Finish({.pid = 1});
  ASSERT_EQ(p.size(), expected_size);

  const uint64_t events_size = records::kRangeSize + records::kStepSize + records::kThreadNameSize;
  ASSERT_EQ(U64(p, 16), 3u);
  ASSERT_EQ(U64(p, 32), events_size);
  const size_t e = records::kHeaderSize;
  // Range.
  EXPECT_EQ(U16(p, e), static_cast<uint16_t>(records::Kind::kRange));
  EXPECT_EQ(U16(p, e + 2), records::kRangeSize);
  EXPECT_EQ(U32(p, e + 4), 11u);
  EXPECT_EQ(static_cast<int64_t>(U64(p, e + 8)), -5);
  EXPECT_EQ(static_cast<int64_t>(U64(p, e + 16)), 1'000'000'000'000LL);
  EXPECT_EQ(U32(p, e + 24), fwd);
  EXPECT_EQ(U32(p, e + 28), 2u);
  EXPECT_EQ(U64(p, e + 32), 0x1122334455667788ULL);
  EXPECT_EQ(static_cast<uint8_t>(p[e + 32]), 0x88);  // little-endian
  // Step.
  const size_t s = e + records::kRangeSize;
  EXPECT_EQ(U16(p, s), static_cast<uint16_t>(records::Kind::kStep));
  EXPECT_EQ(U16(p, s + 2), records::kStepSize);
  EXPECT_EQ(U32(p, s + 4), 12u);
  EXPECT_EQ(U64(p, s + 8), 77u);
  EXPECT_EQ(U64(p, s + 16), 9u);
  // Thread name.
  const size_t t = s + records::kStepSize;
  EXPECT_EQ(U16(p, t), static_cast<uint16_t>(records::Kind::kThreadName));
  EXPECT_EQ(U16(p, t + 2), records::kThreadNameSize);
  EXPECT_EQ(U32(p, t + 4), 13u);
  EXPECT_EQ(U32(p, t + 8), thread);
  EXPECT_EQ(U32(p, t + 12), 0u);
  // Strings: "forward" (7 bytes, padded to 8) then "worker" (6, padded to 8).
  const size_t str = U64(p, 40);
  EXPECT_EQ(str, e + events_size);
  EXPECT_EQ(U64(p, 56), 2u);
  EXPECT_EQ(U64(p, 48), 4u + 8u + 4u + 8u);
  EXPECT_EQ(U32(p, str), 7u);
  EXPECT_EQ(p.substr(str + 4, 7), "forward");
  EXPECT_EQ(p[str + 11], '\0');
  EXPECT_EQ(U32(p, str + 12), 6u);
  EXPECT_EQ(p.substr(str + 16, 6), "worker");
  EXPECT_EQ(str + U64(p, 48), p.size());
}

TEST(RecordWriterTest, LongStringsAreTruncated) {
  RecordWriter writer;
  writer.InternString(std::string(records::kMaxStringLength + 100, 'x'));
  const std::string p = writer.Finish({});
  EXPECT_EQ(U32(p, records::kHeaderSize), records::kMaxStringLength);
}

TEST(RecordWriterTest, FinishResetsTheWriter) {
  RecordWriter writer;
  writer.AddStep(1, 2, 3);
  writer.InternString("a");
  (void)writer.Finish({});
  EXPECT_EQ(writer.event_count(), 0u);
  EXPECT_EQ(writer.Finish({}).size(), records::kHeaderSize);
}

}  // namespace
}  // namespace gpuctl::client
