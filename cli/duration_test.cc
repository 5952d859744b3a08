#include "cli/duration.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::cli {
namespace {

using ::testing::HasSubstr;

TEST(CliParseUserDurationTest, AcceptsHumanForms) {
  struct Case {
    const char* text;
    absl::Duration want;
  };
  for (const Case& c : {Case{"5s", absl::Seconds(5)}, Case{"500ms", absl::Milliseconds(500)},
                        Case{"2m", absl::Minutes(2)}, Case{"1m30s", absl::Seconds(90)},
                        Case{"1.5s", absl::Milliseconds(1500)},
                        Case{"100us", absl::Microseconds(100)}, Case{"1h", absl::Hours(1)},
                        Case{"1h2m3s", absl::Seconds(3723)}, Case{"0.25s", absl::Milliseconds(250)},
                        Case{"24h", absl::Hours(24)}, Case{"750ns", absl::Nanoseconds(750)}}) {
    absl::StatusOr<absl::Duration> d = ParseUserDuration(c.text);
    ASSERT_TRUE(d.ok()) << c.text << ": " << d.status();
    EXPECT_EQ(*d, c.want) << c.text;
  }
}

TEST(CliParseUserDurationTest, RejectsWithReason) {
  struct Case {
    const char* text;
    const char* reason;
  };
  for (const Case& c :
       {Case{"", "empty"},
        Case{"5", "a unit is required (units: h, m, s, ms, us, ns)"},
        Case{"0", "unit is required"},
        Case{"0s", "greater than zero"},
        Case{"0ms0s", "greater than zero"},
        Case{"-5s", "must be positive"},
        Case{"+5s", "no sign"},
        Case{"abc", "expected a number"},
        Case{"5x", "unknown unit \"x\" (units: h, m, s, ms, us, ns)"},
        Case{"5 s", "expected a unit after the number (units: h, m, s, ms, us, ns)"},
        Case{" 5s", "expected a number"},
        Case{"5s ", "expected a number"},
        Case{"inf", "expected a number"},
        Case{".5s", "expected a number"},
        Case{"5.s", "digits after"},
        Case{"1m30", "unit is required"},
        Case{"25h", "maximum"},
        Case{"99999999999999999999h", "out of range"},
        Case{"5sec", "unknown unit \"sec\" (units: h, m, s, ms, us, ns)"},
        Case{"1m30secs", "unknown unit \"secs\""},
        Case{"2hours", "unknown unit \"hours\""},
        Case{"s", "expected a number"}}) {
    absl::StatusOr<absl::Duration> d = ParseUserDuration(c.text);
    ASSERT_FALSE(d.ok()) << "accepted \"" << c.text << "\"";
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(d.status().message(), HasSubstr(c.reason)) << c.text;
    EXPECT_THAT(d.status().message(), HasSubstr(absl::StrCat("\"", c.text, "\""))) << c.text;
    EXPECT_THAT(d.status().message(), HasSubstr("e.g. 5s"));
  }
}

TEST(CliParseUserDurationTest, ZeroOnlyWhenAllowed) {
  EXPECT_EQ(*ParseUserDuration("0s", /*allow_zero=*/true), absl::ZeroDuration());
  EXPECT_EQ(*ParseUserDuration("0ms0s", /*allow_zero=*/true), absl::ZeroDuration());
  EXPECT_EQ(*ParseUserDuration("5ms", /*allow_zero=*/true), absl::Milliseconds(5));
  EXPECT_THAT(ParseUserDuration("-0s", /*allow_zero=*/true).status().message(),
              HasSubstr("must be positive"));
  EXPECT_THAT(ParseUserDuration("0", /*allow_zero=*/true).status().message(),
              HasSubstr("unit is required"));
}

TEST(CliParseLookbackTest, AcceptsDaysAndTheUsualUnits) {
  EXPECT_EQ(*ParseLookback("7d"), absl::Hours(24 * 7));
  EXPECT_EQ(*ParseLookback("1d12h"), absl::Hours(36));
  EXPECT_EQ(*ParseLookback("1.5d"), absl::Hours(36));
  EXPECT_EQ(*ParseLookback("90m"), absl::Minutes(90));
  EXPECT_EQ(*ParseLookback("366d"), kMaxLookback);
  EXPECT_EQ(*ParseLookback("365d24h"), kMaxLookback);
}

TEST(CliParseLookbackTest, RejectsWithReason) {
  struct Case {
    const char* text;
    const char* reason;
  } cases[] = {
      {"", "empty"},
      {"-1d", "must be positive"},
      {"7", "unit is required"},
      {"7w", "unknown unit \"w\" (units: d, h"},
      {"367d", "longer than the 366d maximum"},
      {"366d1s", "longer than the 366d maximum"},
      {"99999999999999999999d", "out of range"},
      {"0d", "must be greater than zero"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<absl::Duration> d = ParseLookback(c.text);
    ASSERT_FALSE(d.ok()) << c.text;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(d.status().message(), HasSubstr(c.reason)) << c.text;
    EXPECT_THAT(d.status().message(), HasSubstr("e.g. 6h, 7d")) << c.text;
  }
  // Days stay a look-back unit: a profiling window is not given in days.
  EXPECT_THAT(ParseUserDuration("1d").status().message(), HasSubstr("unknown unit \"d\""));
}

TEST(CliFormatUserDurationTest, Compact) {
  EXPECT_EQ(FormatUserDuration(absl::Seconds(90)), "1m30s");
  EXPECT_EQ(FormatUserDuration(absl::Milliseconds(500)), "500ms");
  EXPECT_EQ(FormatUserDuration(absl::Minutes(10)), "10m");
}

}  // namespace
}  // namespace gpuctl::cli
