#include "cli/flag_number.h"

#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::cli {
namespace {

TEST(CliParseFlagNumberTest, AcceptsDecimalDigitsWithinTheRange) {
  EXPECT_EQ(*ParseFlagNumber("--n", "1", "a count", 1, 10), 1u);
  EXPECT_EQ(*ParseFlagNumber("--n", "10", "a count", 1, 10), 10u);
  EXPECT_EQ(*ParseFlagNumber("--n", "007", "a count", 0, 10), 7u);
  EXPECT_EQ(*ParseFlagNumber("--n", "18446744073709551615", "a step", 0,
                             std::numeric_limits<uint64_t>::max()),
            std::numeric_limits<uint64_t>::max());
}

TEST(CliParseFlagNumberTest, SaysWhatTheFlagAcceptsInWords) {
  struct Case {
    const char* text;
    uint64_t min;
    uint64_t max;
    const char* message;
  };
  const uint64_t big = std::numeric_limits<int32_t>::max();
  for (const Case& c : {
           Case{"abc", 1, big, "--n: expected a count, a positive integer, got \"abc\""},
           Case{"0", 1, big, "--n: expected a count, a positive integer, got \"0\""},
           Case{"-3", 1, big, "--n: expected a count, a positive integer, got \"-3\""},
           Case{"x", 0, big, "--n: expected a count, an integer, 0 or more, got \"x\""},
           Case{"1", 2, big, "--n: expected a count, an integer, 2 or more, got \"1\""},
           Case{"1025", 1, 1024, "--n: expected a count, an integer from 1 to 1024, got \"1025\""},
           Case{"", 1, 10, "--n: expected a count, an integer from 1 to 10, got \"\""},
           Case{"1e3", 1, big, "--n: expected a count, a positive integer, got \"1e3\""},
           Case{"99999999999999999999", 0, std::numeric_limits<uint64_t>::max(),
                "--n: expected a count, an integer, 0 or more, got \"99999999999999999999\""},
       }) {
    absl::StatusOr<uint64_t> v = ParseFlagNumber("--n", c.text, "a count", c.min, c.max);
    ASSERT_FALSE(v.ok()) << c.text;
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(v.status().message(), c.message);
  }
}

TEST(CliParseFlagNumberTest, QuotesAtMostALineOfWhatWasTyped) {
  absl::StatusOr<uint64_t> v = ParseFlagNumber("--n", std::string(5000, 'x'), "a count", 1, 10);
  ASSERT_FALSE(v.ok());
  EXPECT_LT(v.status().message().size(), 200u);
  EXPECT_THAT(std::string(v.status().message()), ::testing::EndsWith("...\""));
}

}  // namespace
}  // namespace gpuctl::cli
