#include "daemon/runtime/daemon_options.h"

#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;

struct Parsed {
  ParsedFlags flags;
  std::string out;
  std::string err;
};

Parsed Parse(std::vector<std::string> args, const char* socket_env = nullptr) {
  args.insert(args.begin(), "gpuctld");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  Parsed p;
  p.flags = ParseDaemonFlags(static_cast<int>(argv.size()), argv.data(), socket_env, out, err);
  p.out = out.str();
  p.err = err.str();
  return p;
}

TEST(DaemonOptionsTest, DefaultsMatchTheDocumentedOnes) {
  Parsed p = Parse({});
  ASSERT_TRUE(p.flags.options.has_value()) << p.err;
  const DaemonOptions& o = *p.flags.options;
  EXPECT_EQ(o.listen_address, "127.0.0.1:7070");
  EXPECT_EQ(o.socket_path, "/run/gpuctl/gpuctl.sock");
  EXPECT_EQ(o.store_dir, "/var/lib/gpuctl/traces");
  EXPECT_EQ(o.max_duration, absl::Minutes(10));
  EXPECT_EQ(o.start_delay, absl::Milliseconds(100));
  EXPECT_EQ(o.result_grace, absl::Seconds(10));
  EXPECT_EQ(o.log_level, LogLevel::kInfo);
  EXPECT_TRUE(o.ready_file.empty());
}

TEST(DaemonOptionsTest, SocketComesFromTheEnvironmentUnlessGiven) {
  EXPECT_EQ(Parse({}, "/tmp/env.sock").flags.options->socket_path, "/tmp/env.sock");
  EXPECT_EQ(Parse({"--socket", "/tmp/flag.sock"}, "/tmp/env.sock").flags.options->socket_path,
            "/tmp/flag.sock");
}

TEST(DaemonOptionsTest, ParsesEveryFlag) {
  Parsed p = Parse({"--listen", "127.0.0.1:0", "--store", "/tmp/s", "--max-duration", "2m",
                    "--start-delay", "500ms", "--result-grace=1h30m", "--ready-file", "/tmp/r",
                    "--log-level", "debug"});
  ASSERT_TRUE(p.flags.options.has_value()) << p.err;
  const DaemonOptions& o = *p.flags.options;
  EXPECT_EQ(o.listen_address, "127.0.0.1:0");
  EXPECT_EQ(o.store_dir, "/tmp/s");
  EXPECT_EQ(o.max_duration, absl::Minutes(2));
  EXPECT_EQ(o.start_delay, absl::Milliseconds(500));
  EXPECT_EQ(o.result_grace, absl::Minutes(90));
  EXPECT_EQ(o.ready_file, "/tmp/r");
  EXPECT_EQ(o.log_level, LogLevel::kDebug);
}

TEST(DaemonOptionsTest, StartDelayMayBeZero) {
  Parsed p = Parse({"--start-delay", "0"});
  ASSERT_TRUE(p.flags.options.has_value()) << p.err;
  EXPECT_EQ(p.flags.options->start_delay, absl::ZeroDuration());
}

TEST(DaemonOptionsTest, BadValuesExitWithTwoAndSayWhy) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--max-duration", "10"}, "--max-duration"},
      {{"--max-duration", "-5s"}, "--max-duration"},
      {{"--max-duration", "inf"}, "--max-duration"},
      {{"--max-duration", "0s"}, "--max-duration"},
      {{"--result-grace", "soon"}, "--result-grace"},
      {{"--start-delay", "1parsec"}, "--start-delay"},
      {{"--log-level", "loud"}, "--log-level"},
      {{"--listen", "nohost"}, "HOST:PORT"},
      {{"--listen", "127.0.0.1:70000"}, "port"},
      {{"--listen", "0.0.0.0:7070"}, "--insecure"},
      {{"--socket", ""}, "--socket"},
      {{"--bogus"}, "bogus"},
  };
  for (const auto& [args, expected] : cases) {
    Parsed p = Parse(args);
    EXPECT_FALSE(p.flags.options.has_value()) << args[0];
    EXPECT_EQ(p.flags.exit_code, 2) << args[0];
    EXPECT_THAT(p.err, HasSubstr(expected)) << args[0];
  }
}

TEST(DaemonOptionsTest, NonLoopbackNeedsInsecure) {
  Parsed p = Parse({"--listen", "0.0.0.0:7070", "--insecure"});
  EXPECT_TRUE(p.flags.options.has_value()) << p.err;
  EXPECT_TRUE(Parse({"--listen", "[::1]:0"}).flags.options.has_value());
  EXPECT_TRUE(Parse({"--listen", "localhost:7070"}).flags.options.has_value());
}

TEST(DaemonOptionsTest, VersionAndHelpExitWithZero) {
  Parsed version = Parse({"--version"});
  EXPECT_FALSE(version.flags.options.has_value());
  EXPECT_EQ(version.flags.exit_code, 0);
  EXPECT_THAT(version.out, HasSubstr("gpuctld "));
  Parsed help = Parse({"--help"});
  EXPECT_EQ(help.flags.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--ready-file"));
}

TEST(ParseHumanDurationTest, AcceptsUnitsAndRejectsTheRest) {
  EXPECT_EQ(*ParseHumanDuration("500ms"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseHumanDuration("1.5s"), absl::Milliseconds(1500));
  EXPECT_EQ(*ParseHumanDuration("10m"), absl::Minutes(10));
  for (const char* bad : {"", "5", "s", "-1s", "+1s", "inf", "1 s", "0ms", "1d"}) {
    EXPECT_FALSE(ParseHumanDuration(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace gpuctl::daemon
