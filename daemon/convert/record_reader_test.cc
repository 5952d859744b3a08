#include "daemon/convert/record_reader.h"

#include <vector>

#include "daemon/convert/testing/payload_builder.h"
#include "gmock/gmock.h"
#include "gpuctl/v1/records.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::gpuctl::testing::PayloadBuilder;
using ::gpuctl::testing::Store16;
using ::gpuctl::testing::Store32;
using ::gpuctl::testing::Store64;
using ::testing::HasSubstr;

constexpr int32_t kPid = 4242;
constexpr int64_t kStart = 1704067200'000'000'000;
constexpr int64_t kEnd = kStart + 2'000'000'000;

RecordReaderOptions Options() {
  RecordReaderOptions o;
  o.expected_pid = kPid;
  return o;
}

std::vector<uint8_t> ValidPayload() {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddThreadName(7, "main");
  b.AddRange(7, kStart + 1000, kStart + 5000, "forward", 0, 1);
  b.AddStep(7, kStart + 100, 3);
  b.set_dropped_events(5);
  return b.Build();
}

absl::Status ReadStatus(const std::vector<uint8_t>& p) {
  return ReadRecords(p, Options()).status();
}

TEST(RecordReaderTest, DecodesValidPayload) {
  std::vector<uint8_t> p = ValidPayload();
  auto r = ReadRecords(p, Options());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->event_count, 3u);
  EXPECT_EQ(r->dropped_events, 5u);
  EXPECT_EQ(r->pid, kPid);
  EXPECT_EQ(r->window_start_ns, kStart);
  EXPECT_EQ(r->window_end_ns, kEnd);
  ASSERT_EQ(r->strings.size(), 2u);
  EXPECT_EQ(r->strings[0], "main");
  EXPECT_EQ(r->strings[1], "forward");
  ASSERT_EQ(r->ranges.size(), 1u);
  EXPECT_EQ(r->ranges[0].tid, 7u);
  EXPECT_EQ(r->ranges[0].start_ns, kStart + 1000);
  EXPECT_EQ(r->ranges[0].end_ns, kStart + 5000);
  EXPECT_EQ(r->strings[r->ranges[0].name], "forward");
  EXPECT_EQ(r->ranges[0].range_id, 1u);
  ASSERT_EQ(r->steps.size(), 1u);
  EXPECT_EQ(r->steps[0].step, 3u);
  ASSERT_EQ(r->thread_names.size(), 1u);
  EXPECT_EQ(r->strings[r->thread_names[0].name], "main");
}

TEST(RecordReaderTest, EmptyPayloadSectionsAreFine) {
  PayloadBuilder b(kPid, kStart, kEnd);
  auto r = ReadRecords(b.Build(), Options());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->event_count, 0u);
}

TEST(RecordReaderTest, SkipsUnknownKindsAndTrailingFields) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddRawRecord(999, std::vector<uint8_t>(20, 0xab));
  // A step with 8 extra bytes from a newer minor version.
  std::vector<uint8_t> step(28, 0);
  std::vector<uint8_t> tmp(28);
  Store32(&tmp, 0, 1);
  Store64(&tmp, 4, static_cast<uint64_t>(kStart + 1));
  Store64(&tmp, 12, 9);
  b.AddRawRecord(static_cast<uint16_t>(records::Kind::kStep), tmp);
  b.set_extra_header_bytes(16);
  b.set_version(1, 7);
  auto r = ReadRecords(b.Build(), Options());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->unknown_records, 1u);
  ASSERT_EQ(r->steps.size(), 1u);
  EXPECT_EQ(r->steps[0].step, 9u);
  EXPECT_EQ(r->version_minor, 7);
}

TEST(RecordReaderTest, RejectsHeaderProblems) {
  std::vector<uint8_t> p = ValidPayload();
  EXPECT_THAT(ReadStatus(std::vector<uint8_t>(p.begin(), p.begin() + 95)).message(),
              HasSubstr("shorter than the 96-byte header"));
  auto bad = p;
  Store32(&bad, 0, 0x12345678);
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("bad magic"));
  bad = p;
  Store16(&bad, 4, 2);
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("version 2 is not supported"));
  bad = p;
  Store32(&bad, 8, 95);
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("header size 95"));
  bad = p;
  Store32(&bad, 8, static_cast<uint32_t>(p.size() + 1));
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("header size"));
  bad = p;
  Store32(&bad, 88, kPid + 1);
  EXPECT_EQ(ReadStatus(bad).message(), "payload pid 4243 is not the sender's pid 4242");
  bad = p;
  Store64(&bad, 80, static_cast<uint64_t>(kStart - 1));
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("window ends"));
  bad = p;
  Store64(&bad, 72, static_cast<uint64_t>(-5));
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("outside [0, 2^62]"));
  bad = p;
  Store64(&bad, 80, static_cast<uint64_t>(kStart + 25 * 3600 * 1'000'000'000LL));
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("longer than the maximum"));
}

TEST(RecordReaderTest, RejectsSectionProblems) {
  std::vector<uint8_t> p = ValidPayload();
  auto bad = p;
  Store64(&bad, 24, 8);  // events overlap the header
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("overlaps the header"));
  bad = p;
  Store64(&bad, 32, ~uint64_t{0});  // huge size, overflow-safe
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("runs past the end"));
  bad = p;
  Store64(&bad, 40, ~uint64_t{0} - 3);
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("string section"));
  bad = p;
  Store64(&bad, 40, 96 + 8);  // strings start inside the events
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("overlap"));
  bad = p;
  Store64(&bad, 16, 4);  // one more event than present
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("runs past the event section"));
  bad = p;
  Store64(&bad, 16, 2);  // one fewer
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("bytes after the last of 2 records"));
  bad = p;
  Store64(&bad, 16, ~uint64_t{0});
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("does not fit the event section"));
  bad = p;
  Store64(&bad, 56, 1000000);
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("does not fit the string section"));
}

TEST(RecordReaderTest, RejectsRecordProblems) {
  // Thread name first (16 bytes at 96), then the range at 112, step at 152.
  std::vector<uint8_t> p = ValidPayload();
  auto bad = p;
  Store16(&bad, 96 + 2, 6);
  EXPECT_EQ(ReadStatus(bad).message(), "record 0: size 6 is not a multiple of 4 of at least 4");
  bad = p;
  Store16(&bad, 96 + 2, 0);
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("record 0: size 0"));
  bad = p;
  Store16(&bad, 112 + 2, 36);  // range too small; the rest no longer lines up
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("record 1: size 36 is below the minimum of 40"));
  bad = p;
  Store16(&bad, 152 + 2, 0xfffc);
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("record 2: size 65532 runs past"));
  bad = p;
  Store32(&bad, 112 + 24, 99);
  EXPECT_EQ(ReadStatus(bad).message(), "record 1: string index 99 >= string count 2");
  bad = p;
  Store32(&bad, 96 + 8, 2);
  EXPECT_EQ(ReadStatus(bad).message(), "record 0: string index 2 >= string count 2");
  bad = p;
  Store64(&bad, 112 + 16, static_cast<uint64_t>(kStart + 999));
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("record 1: range ends at"));
  bad = p;
  Store64(&bad, 112 + 8, static_cast<uint64_t>(kStart - 6'000'000'000));
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("record 1: range start"));
  bad = p;
  Store64(&bad, 152 + 8, static_cast<uint64_t>(kEnd + 6'000'000'000));
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("record 2: step"));
  // Within the slack is fine.
  auto ok = p;
  Store64(&ok, 112 + 8, static_cast<uint64_t>(kStart - 4'000'000'000));
  EXPECT_TRUE(ReadStatus(ok).ok());
}

TEST(RecordReaderTest, RejectsBadStrings) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddString(std::string(records::kMaxStringLength + 1, 'x'));
  EXPECT_THAT(ReadStatus(b.Build()).message(), HasSubstr("string 0: length 4097 exceeds"));
  std::vector<uint8_t> p = ValidPayload();
  // The string section holds "main" then "forward"; make the second too long.
  uint64_t strings_offset = 0;
  for (int i = 0; i < 8; ++i) strings_offset |= static_cast<uint64_t>(p[40 + i]) << (8 * i);
  Store32(&p, strings_offset + 8, 100);
  EXPECT_THAT(ReadStatus(p).message(), HasSubstr("string 1: 100 bytes run past"));
}

}  // namespace
}  // namespace gpuctl::daemon
