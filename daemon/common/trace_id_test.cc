#include "daemon/common/trace_id.h"

#include <algorithm>
#include <array>
#include <random>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "gtest/gtest.h"

namespace gpuctl {
namespace {

TEST(TraceIdTest, GeneratesCanonicalV7) {
  absl::BitGen gen;
  absl::Time now = absl::FromUnixMillis(1704067200123);
  std::string id = GenerateTraceId(now, gen);
  ASSERT_EQ(id.size(), 36u);
  EXPECT_TRUE(IsValidTraceId(id)) << id;
  EXPECT_EQ(id[14], '7');
  EXPECT_TRUE(id[19] == '8' || id[19] == '9' || id[19] == 'a' || id[19] == 'b') << id;
  // 1704067200123 = 0x018cc251f47b
  EXPECT_EQ(id.substr(0, 13), "018cc251-f47b");
  EXPECT_EQ(TraceIdUnixMillis(id), 1704067200123);
  auto t = TraceIdTime(id);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, now);
}

TEST(TraceIdTest, DeterministicWithSeededSource) {
  std::mt19937_64 a(42), b(42);
  absl::Time now = absl::FromUnixMillis(1);
  EXPECT_EQ(GenerateTraceId(now, a), GenerateTraceId(now, b));
}

TEST(TraceIdTest, FormatsGivenBitsWithVersionAndVariant) {
  const std::array<uint8_t, 10> ones = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  EXPECT_EQ(FormatTraceId(absl::FromUnixMillis(0x0123456789ab), ones),
            "01234567-89ab-7fff-bfff-ffffffffffff");
  const std::array<uint8_t, 10> zeros{};
  const std::string id = FormatTraceId(absl::FromUnixMillis(1), zeros);
  EXPECT_EQ(id, "00000000-0001-7000-8000-000000000000");
  EXPECT_TRUE(IsValidTraceId(id));
}

TEST(TraceIdTest, IdsSortByTime) {
  absl::BitGen gen;
  std::vector<std::string> ids;
  std::vector<int64_t> millis = {1704067200000, 1, 1704067200001, 999999999999, 1704067199999};
  ids.reserve(millis.size());
  for (int64_t ms : millis) ids.push_back(GenerateTraceId(absl::FromUnixMillis(ms), gen));
  std::sort(ids.begin(), ids.end());
  std::sort(millis.begin(), millis.end());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(TraceIdUnixMillis(ids[i]), millis[i]);
}

TEST(TraceIdTest, ClampsOutOfRangeTimes) {
  absl::BitGen gen;
  EXPECT_EQ(TraceIdUnixMillis(GenerateTraceId(absl::FromUnixMillis(-5), gen)), 0);
  EXPECT_EQ(TraceIdUnixMillis(GenerateTraceId(absl::InfiniteFuture(), gen)),
            (int64_t{1} << 48) - 1);
}

TEST(TraceIdTest, ValidatorRejectsEverythingElse) {
  const std::string good = "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b";
  ASSERT_TRUE(IsValidTraceId(good));
  const std::vector<std::string> bad = {
      "",
      "../x",
      "..",
      "/",
      "018CC251-F47B-7C4D-9A2B-3C4D5E6F7A8B",   // uppercase
      "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8",    // short
      "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8bb",  // long
      "018cc251f47b7c4d9a2b3c4d5e6f7a8b",       // no hyphens
      "018cc251-f47b-4c4d-9a2b-3c4d5e6f7a8b",   // version 4
      "018cc251-f47b-7c4d-ca2b-3c4d5e6f7a8b",   // wrong variant
      "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8/",
      "018cc251-f47b-7c4d-9a2b/3c4d5e6f7a8b",
      "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8g",
      "../../../../../../../../../etc/passwd",
      std::string("018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8\0", 36),
      " 18cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b",
  };
  for (const std::string& id : bad) EXPECT_FALSE(IsValidTraceId(id)) << id;
  EXPECT_FALSE(TraceIdTime("../x").ok());
}

}  // namespace
}  // namespace gpuctl
