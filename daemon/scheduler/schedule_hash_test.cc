#include "daemon/scheduler/schedule_hash.h"

#include <string>

#include "gtest/gtest.h"

namespace gpuctl::daemon::scheduler {
namespace {

std::string Hex(const ScheduleDigest& digest) {
  constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : digest) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

TEST(ScheduleHashTest, Sha256IsTheStandardOne) {
  // FIPS 180-4, appendix B.1.
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// These vectors pin the schedule of every fleet: they were computed from the
// layout documented in schedule_hash.h by an independent implementation
// (Python's hashlib). A change here changes which slots are sampled.
TEST(ScheduleHashTest, PinnedVectors) {
  EXPECT_EQ(Hex(ScheduleHash(HashDomain::kTimeSlot, "fleet-2026", "hourly", "42", 0)),
            "8d952419060bfe5280c0ea7c4456b7c8ab8908f6551a6f8936092d92bf3ed24d");
  EXPECT_EQ(Hex(ScheduleHash(HashDomain::kTimeSlot, "fleet-2026", "hourly", "42", 2048137)),
            "19d32be2d985e52a1ebd901b38ec552d5f1bce434cec76147886c43e1787535b");
  EXPECT_EQ(Hex(ScheduleHash(HashDomain::kStepBlock, "fleet-2026", "steps", "job-7", 12)),
            "24a7a12a234e89f8a8d5781f71a9563ae6b52f0ecbb818d3d65a6411caf1db67");
  EXPECT_EQ(Hex(ScheduleHash(HashDomain::kTimeSlot, "", "r", "", -1)),
            "19d2b9eab52e0170bf5ae1c10014cc7577813570e0cfb87b7b74eb79968ad6df");
}

TEST(ScheduleHashTest, DerivedValuesArePinned) {
  const ScheduleDigest d = ScheduleHash(HashDomain::kTimeSlot, "fleet-2026", "hourly", "42", 0);
  EXPECT_EQ(DigestUniform(d), 0.55305696116379);
  EXPECT_EQ(DigestOffsetBits(d), 9277673051826599880u);
  const std::array<uint8_t, 10> id = DigestIdBits(d);
  EXPECT_EQ(id[0], 0xab);
  EXPECT_EQ(id[9], 0x09);
}

TEST(ScheduleHashTest, FieldsAreLengthPrefixedSoBoundariesMatter) {
  EXPECT_NE(ScheduleHash(HashDomain::kTimeSlot, "ab", "c", "j", 1),
            ScheduleHash(HashDomain::kTimeSlot, "a", "bc", "j", 1));
  EXPECT_NE(ScheduleHash(HashDomain::kTimeSlot, "s", "r", "j", 1),
            ScheduleHash(HashDomain::kStepBlock, "s", "r", "j", 1));
}

TEST(ScheduleHashTest, UniformStaysBelowOne) {
  ScheduleDigest ones;
  ones.fill(0xff);
  EXPECT_LT(DigestUniform(ones), 1.0);
  ScheduleDigest zeros{};
  EXPECT_EQ(DigestUniform(zeros), 0.0);
}

}  // namespace
}  // namespace gpuctl::daemon::scheduler
