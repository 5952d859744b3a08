#include "daemon/config/config_values.h"

#include <cstdint>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;

TEST(ParseConfigDurationTest, TakesAWholeNumberAndOneUnit) {
  EXPECT_EQ(*ParseConfigDuration("100ms"), absl::Milliseconds(100));
  EXPECT_EQ(*ParseConfigDuration("10s"), absl::Seconds(10));
  EXPECT_EQ(*ParseConfigDuration("10m"), absl::Minutes(10));
  EXPECT_EQ(*ParseConfigDuration("2h"), absl::Hours(2));
  EXPECT_EQ(*ParseConfigDuration("30d"), absl::Hours(24 * 30));
  EXPECT_EQ(*ParseConfigDuration("0"), absl::ZeroDuration());
  EXPECT_EQ(*ParseConfigDuration("0s"), absl::ZeroDuration());
  EXPECT_EQ(*ParseConfigDuration("36500d"), kMaxConfigDuration);
}

TEST(ParseConfigDurationTest, RefusesEverythingElse) {
  for (const char* bad : {"", "3x", "10", "1.5h", "1h30m", "10 s", " 10s", "10s ", "+10s", "s",
                          "10S", "10us", "inf", "0x10s", "1e3s", "10sec", "ms"}) {
    absl::StatusOr<absl::Duration> d = ParseConfigDuration(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(d.status().message()),
                HasSubstr("is not a duration (use 100ms, 10s, 10m, 2h, 30d)"))
        << bad;
  }
  EXPECT_THAT(std::string(ParseConfigDuration("-5s").status().message()), HasSubstr("is negative"));
  EXPECT_THAT(std::string(ParseConfigDuration("36501d").status().message()),
              HasSubstr("at most 36500d"));
  EXPECT_THAT(std::string(ParseConfigDuration("99999999999999999999999s").status().message()),
              HasSubstr("too long"));
}

TEST(ParseByteSizeTest, TakesBytesOrAWholeNumberAndAUnit) {
  EXPECT_EQ(*ParseByteSize("0"), 0u);
  EXPECT_EQ(*ParseByteSize("1048576"), 1048576u);
  EXPECT_EQ(*ParseByteSize("512KiB"), 512u << 10);
  EXPECT_EQ(*ParseByteSize("256MiB"), 256u << 20);
  EXPECT_EQ(*ParseByteSize("50GiB"), uint64_t{50} << 30);
  EXPECT_EQ(*ParseByteSize("2TiB"), uint64_t{2} << 40);
  EXPECT_EQ(*ParseByteSize("5KB"), 5000u);
  EXPECT_EQ(*ParseByteSize("5MB"), 5000000u);
  EXPECT_EQ(*ParseByteSize("5GB"), 5000000000u);
  EXPECT_EQ(*ParseByteSize("5TB"), 5000000000000u);
  EXPECT_EQ(*ParseByteSize("18446744073709551615"), std::numeric_limits<uint64_t>::max());
}

TEST(ParseByteSizeTest, RefusesEverythingElse) {
  for (const char* bad : {"", "GiB", "1.5GiB", "50 GiB", "50gib", "50G", "50Gi", "50GIB", "50B",
                          "+5", "0x10", "5e9", "ten", "50GiB "}) {
    absl::StatusOr<uint64_t> n = ParseByteSize(bad);
    ASSERT_FALSE(n.ok()) << bad;
    EXPECT_THAT(std::string(n.status().message()), HasSubstr("is not a size")) << bad;
  }
  EXPECT_THAT(std::string(ParseByteSize("-1").status().message()), HasSubstr("is negative"));
  EXPECT_THAT(std::string(ParseByteSize("-5GiB").status().message()), HasSubstr("is negative"));
  EXPECT_THAT(std::string(ParseByteSize("18446744073709551616").status().message()),
              HasSubstr("too large"));
  EXPECT_THAT(std::string(ParseByteSize("16777216TiB").status().message()), HasSubstr("too large"));
}

TEST(ParseConfigCountTest, TakesPlainDecimals) {
  EXPECT_EQ(*ParseConfigCount("0"), 0u);
  EXPECT_EQ(*ParseConfigCount("100000"), 100000u);
  EXPECT_EQ(*ParseConfigCount("007"), 7u);
  for (const char* bad : {"", "1k", "1.0", "+1", "0x10", "1e5", " 1"}) {
    EXPECT_THAT(std::string(ParseConfigCount(bad).status().message()),
                HasSubstr("not a whole number"))
        << bad;
  }
  EXPECT_THAT(std::string(ParseConfigCount("-1").status().message()), HasSubstr("is negative"));
  EXPECT_THAT(std::string(ParseConfigCount("99999999999999999999").status().message()),
              HasSubstr("too large"));
}

TEST(FormatTest, FormsReadBackExactly) {
  for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, uint64_t{1000}, uint64_t{1024}, uint64_t{1536},
                         uint64_t{5} << 20, uint64_t{50} << 30, uint64_t{3} << 40,
                         uint64_t{7000000000000}, std::numeric_limits<uint64_t>::max()}) {
    EXPECT_EQ(*ParseByteSize(FormatByteSize(bytes)), bytes) << FormatByteSize(bytes);
  }
  EXPECT_EQ(FormatByteSize(uint64_t{256} << 20), "256MiB");
  EXPECT_EQ(FormatByteSize(50000000000), "50GB");
  EXPECT_EQ(FormatByteSize(1536), "1536");
  for (absl::Duration d : {absl::ZeroDuration(), absl::Milliseconds(100), absl::Seconds(90),
                           absl::Minutes(10), absl::Hours(36), absl::Hours(24 * 30)}) {
    EXPECT_EQ(*ParseConfigDuration(FormatConfigDuration(d)), d) << FormatConfigDuration(d);
  }
  EXPECT_EQ(FormatConfigDuration(absl::Hours(48)), "2d");
  EXPECT_EQ(FormatConfigDuration(absl::Milliseconds(1500)), "1500ms");
}

TEST(CheckHostNameTest, TakesDnsLikeNames) {
  for (const char* name : {"gpu-node-1", "node1.cluster.local", "a", "ip-10-0-0-1_x", "7"}) {
    EXPECT_TRUE(CheckHostName(name).ok()) << name;
  }
  EXPECT_TRUE(CheckHostName(std::string(kMaxHostNameBytes, 'n')).ok());
}

TEST(CheckHostNameTest, RefusesEmptyLongAndUnsafeNames) {
  EXPECT_EQ(CheckHostName("").message(), "a host name must not be empty");
  const absl::Status too_long = CheckHostName(std::string(kMaxHostNameBytes + 1, 'n'));
  EXPECT_THAT(too_long.message(), HasSubstr("254 bytes long, more than 253"));
  // The excerpt of a long name is bounded.
  EXPECT_LT(too_long.message().size(), 200u);
  EXPECT_THAT(CheckHostName("-node").message(), HasSubstr("must start with a letter or digit"));
  EXPECT_THAT(CheckHostName(".node").message(), HasSubstr("must start with a letter or digit"));
  // A Kubernetes variable reference left unexpanded.
  EXPECT_THAT(CheckHostName("$(NODE_NAME)").message(),
              HasSubstr("\"$(NODE_NAME)\" must start with a letter or digit"));
  for (const char* name : {"node 1", "node/1", "node\n", "n\x01", "n\xc3\xa9"}) {
    absl::Status s = CheckHostName(name);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(s.message(), HasSubstr("letters, digits")) << name;
  }
}

TEST(QuoteConfigTextTest, EscapesAndCuts) {
  EXPECT_EQ(QuoteConfigText("3x"), "\"3x\"");
  EXPECT_EQ(QuoteConfigText("a\nb\"c"), "\"a\\nb\\\"c\"");
  std::string long_text(100, 'a');
  EXPECT_EQ(QuoteConfigText(long_text), "\"" + std::string(64, 'a') + "\"...");
}

}  // namespace
}  // namespace gpuctl::daemon
