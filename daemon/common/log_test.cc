#include "daemon/common/log.h"

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(LogTest, FormatsLogfmt) {
  absl::Time ts = absl::FromUnixMillis(1704067200123);
  std::string line = FormatLogLine(ts, LogLevel::kInfo, "trace started",
                                   {{"trace_id", "abc"}, {"pids", 2}, {"job", ""}});
  EXPECT_EQ(line,
            "ts=2024-01-01T00:00:00.123Z level=info msg=\"trace started\" trace_id=abc pids=2 "
            "job=\"\"");
}

TEST(LogTest, QuotesAndEscapesValues) {
  std::string line = FormatLogLine(absl::UnixEpoch(), LogLevel::kError, "x",
                                   {{"reason", "a \"b\"\n=c\\"}, {"ctl", std::string("\x01", 1)}});
  EXPECT_THAT(line, HasSubstr("level=error msg=\"x\""));
  EXPECT_THAT(line, HasSubstr(R"(reason="a \"b\"\n=c\\")"));
  EXPECT_THAT(line, HasSubstr(R"(ctl="\x01")"));
  EXPECT_EQ(line.find('\n'), std::string::npos);
}

TEST(LogTest, MinLevelFiltersAndSinkReceives) {
  std::vector<std::string> lines;
  SetLogSinkForTesting([&](absl::string_view l) { lines.emplace_back(l); });
  LogLevel saved = MinLogLevel();
  SetMinLogLevel(LogLevel::kWarning);
  LogInfo("hidden");
  LogWarning("shown", {{"k", 1}});
  SetMinLogLevel(saved);
  SetLogSinkForTesting(nullptr);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("level=warn msg=\"shown\" k=1"));
}

TEST(LogTest, ParsesLevels) {
  LogLevel level;
  EXPECT_TRUE(ParseLogLevel("debug", &level));
  EXPECT_EQ(level, LogLevel::kDebug);
  EXPECT_TRUE(ParseLogLevel("warn", &level));
  EXPECT_EQ(level, LogLevel::kWarning);
  EXPECT_FALSE(ParseLogLevel("loud", &level));
}

}  // namespace
}  // namespace gpuctl
