#include "daemon/config/daemon_options.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/core/daemon_core.h"
#include "daemon/ipc/ipc_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Parsed {
  ParsedFlags flags;
  std::string out;
  std::string err;
};

Parsed Parse(std::vector<std::string> args, const char* socket_env = nullptr) {
  args.insert(args.begin(), "gpuctld");
  std::vector<const char*> argv;
  argv.reserve(args.size());
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

TEST(DaemonOptionsTest, DefaultsOfTheFileOnlySettings) {
  Parsed p = Parse({});
  ASSERT_TRUE(p.flags.options.has_value()) << p.err;
  const DaemonOptions& o = *p.flags.options;
  // The daemon's own components use the same defaults.
  EXPECT_EQ(o.max_payload_bytes, CoreOptions{}.max_payload_bytes);
  EXPECT_EQ(o.max_payload_bytes, IpcServerOptions{}.max_payload_bytes);
  EXPECT_EQ(o.max_buffer_bytes, CoreOptions{}.max_buffer_bytes);
  EXPECT_EQ(o.retention.max_bytes, uint64_t{50} << 30);
  EXPECT_EQ(o.retention.max_age, absl::Hours(24 * 30));
  EXPECT_EQ(o.retention.max_count, 100000u);
  EXPECT_FALSE(o.s3.has_value());
  EXPECT_FALSE(o.insecure);
}

TEST(DaemonOptionsTest, MaxIngestBytesFlag) {
  EXPECT_EQ(Parse({}).flags.options->max_ingest_bytes, CoreOptions{}.max_ingest_bytes);
  Parsed p = Parse({"--max-ingest-bytes", "2GiB"});
  ASSERT_TRUE(p.flags.options.has_value()) << p.err;
  EXPECT_EQ(p.flags.options->max_ingest_bytes, uint64_t{2} << 30);
  Parsed none = Parse({"--max-ingest-bytes=0"});
  ASSERT_TRUE(none.flags.options.has_value()) << none.err;
  EXPECT_EQ(none.flags.options->max_ingest_bytes, 0u);
  for (const char* bad : {"1KiB", "2TiB", "lots", "-1"}) {
    Parsed refused = Parse({"--max-ingest-bytes", bad});
    EXPECT_FALSE(refused.flags.options.has_value()) << bad;
    EXPECT_EQ(refused.flags.exit_code, 2) << bad;
    EXPECT_NE(refused.err.find("--max-ingest-bytes: "), std::string::npos) << refused.err;
  }
  EXPECT_NE(Parse({"--max-ingest-bytes", "1KiB"})
                .err.find("1KiB is out of range (0 for no cap, or "
                          "1MiB to 1TiB)"),
            std::string::npos);
}

TEST(DaemonOptionsTest, HelloRateFlags) {
  const DaemonOptions defaults = *Parse({}).flags.options;
  EXPECT_EQ(defaults.hello_rate, IpcServerOptions{}.hello_rate);
  EXPECT_EQ(defaults.hello_burst, IpcServerOptions{}.hello_burst);
  Parsed p = Parse({"--hello-rate", "0", "--hello-burst=10"});
  ASSERT_TRUE(p.flags.options.has_value()) << p.err;
  EXPECT_EQ(p.flags.options->hello_rate, 0u);
  EXPECT_EQ(p.flags.options->hello_burst, 10u);
  for (auto [flag, bad] : {std::pair{"--hello-rate", "fast"}, std::pair{"--hello-rate", "-3"},
                           std::pair{"--hello-rate", "1000001"}, std::pair{"--hello-burst", "0"},
                           std::pair{"--hello-burst", "2.5"}}) {
    Parsed refused = Parse({flag, bad});
    EXPECT_FALSE(refused.flags.options.has_value()) << flag << " " << bad;
    EXPECT_EQ(refused.flags.exit_code, 2) << bad;
    EXPECT_NE(refused.err.find(absl::StrCat(flag, ": ")), std::string::npos) << refused.err;
  }
  EXPECT_NE(Parse({"--hello-burst", "0"}).err.find("0 is out of range (1 to 1000000)"),
            std::string::npos);
}

TEST(DaemonOptionsTest, StoreRetentionFlags) {
  Parsed p = Parse({"--store-max-bytes", "10GB", "--store-max-age=7d", "--store-max-count", "25"});
  ASSERT_TRUE(p.flags.options.has_value()) << p.err;
  EXPECT_EQ(p.flags.options->retention.max_bytes, 10000000000u);
  EXPECT_EQ(p.flags.options->retention.max_age, absl::Hours(24 * 7));
  EXPECT_EQ(p.flags.options->retention.max_count, 25u);
  Parsed unlimited = Parse({"--store-max-bytes=0", "--store-max-age=0", "--store-max-count=0"});
  ASSERT_TRUE(unlimited.flags.options.has_value()) << unlimited.err;
  EXPECT_EQ(unlimited.flags.options->retention.max_bytes, 0u);
  EXPECT_EQ(unlimited.flags.options->retention.max_age, absl::ZeroDuration());
  EXPECT_EQ(unlimited.flags.options->retention.max_count, 0u);

  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--store-max-bytes", "50 GiB"}, "--store-max-bytes: \"50 GiB\" is not a size"},
      {{"--store-max-bytes", "-1"}, "--store-max-bytes: \"-1\" is negative"},
      {{"--store-max-age", "1h30m"}, "--store-max-age: \"1h30m\" is not a duration"},
      {{"--store-max-age", "-1d"}, "--store-max-age: \"-1d\" is negative"},
      {{"--store-max-count", "lots"}, "--store-max-count: \"lots\" is not a whole number"},
      {{"--config", ""}, "--config must not be empty"},
  };
  for (const auto& [args, expected] : cases) {
    Parsed bad = Parse(args);
    EXPECT_FALSE(bad.flags.options.has_value()) << args[0];
    EXPECT_EQ(bad.flags.exit_code, 2) << args[0];
    EXPECT_THAT(bad.err, StartsWith("gpuctld: " + expected));
  }
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

TEST(DaemonOptionsTest, SocketAccessFlagsAndNamesResolvedAtStartup) {
  Parsed p = Parse({"--socket-mode", "0600", "--socket-group", "root"});
  ASSERT_TRUE(p.flags.options.has_value()) << p.err;
  EXPECT_EQ(p.flags.options->socket_mode, 0600u);
  EXPECT_EQ(p.flags.options->socket_gid, 0u);
  EXPECT_EQ(Parse({}).flags.options->socket_mode, 0660u);
  EXPECT_FALSE(Parse({}).flags.options->socket_gid.has_value());

  Parsed bad = Parse({"--socket-group", "no-such-group-gpuctl"});
  EXPECT_EQ(bad.flags.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--socket-group: no group named \"no-such-group-gpuctl\""));
  EXPECT_THAT(Parse({"--socket-mode", "rw"}).err, HasSubstr("--socket-mode: socket mode \"rw\""));

  char tmpl[] = "/tmp/gpuctld-access-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string config = std::string(tmpl) + "/gpuctld.yaml";
  std::ofstream(config) << "ipc:\n  socket_group: \"0\"\n  allowed_uids: [root, 1234]\n";
  Parsed file = Parse({"--config", config});
  ASSERT_TRUE(file.flags.options.has_value()) << file.err;
  EXPECT_EQ(file.flags.options->socket_gid, 0u);
  EXPECT_EQ(file.flags.options->allowed_uids, (std::vector<uint32_t>{0, 1234}));
  std::ofstream(config) << "ipc:\n  allowed_uids: [1000, no-such-user-gpuctl]\n";
  Parsed missing = Parse({"--config", config});
  EXPECT_EQ(missing.flags.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr(config + ":2: ipc.allowed_uids: no user named "
                                              "\"no-such-user-gpuctl\""));
  std::filesystem::remove_all(tmpl);
}

TEST(DaemonOptionsTest, MetricsAreOffUnlessAListenAddressIsGiven) {
  EXPECT_EQ(Parse({}).flags.options->metrics.listen, "");
  Parsed p = Parse({"--metrics-listen", "127.0.0.1:9464"});
  ASSERT_TRUE(p.flags.options.has_value()) << p.err;
  EXPECT_EQ(p.flags.options->metrics.listen, "127.0.0.1:9464");
  EXPECT_FALSE(p.flags.options->metrics.allow_insecure);
  Parsed open = Parse({"--metrics-listen", "0.0.0.0:9464", "--metrics-allow-insecure"});
  ASSERT_TRUE(open.flags.options.has_value()) << open.err;
  EXPECT_TRUE(open.flags.options->metrics.allow_insecure);
  Parsed refused = Parse({"--metrics-listen", "0.0.0.0:9464"});
  EXPECT_EQ(refused.flags.exit_code, 2);
  EXPECT_THAT(refused.err, HasSubstr("refusing to serve metrics on 0.0.0.0:9464"));
  EXPECT_THAT(Parse({"--metrics-listen", ""}).err, HasSubstr("--metrics-listen is empty"));
  EXPECT_THAT(Parse({"--metrics-listen", "[::1]:9464"}).err, HasSubstr("IPv6"));
}

TEST(DaemonOptionsTest, MetricsFromTheFileAreCheckedAtTheirLineOnceFlagsAreMerged) {
  char tmpl[] = "/tmp/gpuctld-metrics-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string config = std::string(tmpl) + "/gpuctld.yaml";
  std::ofstream(config) << "metrics:\n  listen: 0.0.0.0:9464\n";
  Parsed refused = Parse({"--config", config});
  EXPECT_EQ(refused.flags.exit_code, 2);
  EXPECT_THAT(refused.err,
              HasSubstr(config + ":2: metrics.listen: refusing to serve metrics on 0.0.0.0:9464"));
  // The flag lifts the rule for the file's address.
  Parsed lifted = Parse({"--config", config, "--metrics-allow-insecure"});
  ASSERT_TRUE(lifted.flags.options.has_value()) << lifted.err;
  EXPECT_EQ(lifted.flags.options->metrics.listen, "0.0.0.0:9464");
  std::ofstream(config) << "metrics:\n  listen: 0.0.0.0:9464\n  allow_insecure: true\n";
  EXPECT_TRUE(Parse({"--config", config}).flags.options.has_value());
  std::ofstream(config) << "metrics:\n  listen: \"metrics.example:9464\"\n";
  EXPECT_THAT(Parse({"--config", config}).err,
              HasSubstr(config + ":2: metrics.listen: \"metrics.example:9464\": the host must be "
                                 "an IPv4 address or localhost"));
  std::filesystem::remove_all(tmpl);
}

TEST(DaemonOptionsTest, HostNameFlag) {
  // Empty: the daemon takes the system's name when it starts.
  EXPECT_EQ(Parse({}).flags.options->host_name, "");
  Parsed p = Parse({"--host-name", "gpu-node-3.cluster"});
  ASSERT_TRUE(p.flags.options.has_value()) << p.err;
  EXPECT_EQ(p.flags.options->host_name, "gpu-node-3.cluster");
}

TEST(DaemonOptionsTest, StartDelayMayBeZero) {
  Parsed p = Parse({"--start-delay", "0"});
  ASSERT_TRUE(p.flags.options.has_value()) << p.err;
  EXPECT_EQ(p.flags.options->start_delay, absl::ZeroDuration());
}

TEST(DaemonOptionsTest, ClockOffsetIsSignedAndBounded) {
  EXPECT_EQ(Parse({}).flags.options->clock_offset, absl::ZeroDuration());
  EXPECT_EQ(Parse({"--clock-offset", "-3s"}).flags.options->clock_offset, absl::Seconds(-3));
  EXPECT_EQ(Parse({"--clock-offset=1m30s"}).flags.options->clock_offset, absl::Seconds(90));
  EXPECT_EQ(Parse({"--clock-offset", "0"}).flags.options->clock_offset, absl::ZeroDuration());
}

TEST(DaemonOptionsTest, BadValuesExitWithTwoAndSayWhy) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--max-duration", "10"}, "--max-duration"},
      {{"--max-duration", "-5s"}, "--max-duration"},
      {{"--max-duration", "inf"}, "--max-duration"},
      {{"--max-duration", "0s"}, "--max-duration"},
      {{"--result-grace", "soon"}, "--result-grace"},
      {{"--start-delay", "1parsec"}, "--start-delay"},
      {{"--start-delay", "61m"}, "--start-delay: 1h1m is more than 1h"},
      {{"--clock-offset", "soon"}, "--clock-offset"},
      {{"--clock-offset=--5s"}, "--clock-offset"},
      {{"--clock-offset=-25h"}, "--clock-offset: -25h is more than 24h either way"},
      {{"--log-level", "loud"}, "--log-level"},
      {{"--listen", "nohost"}, "HOST:PORT"},
      {{"--listen", "127.0.0.1:70000"}, "port"},
      {{"--listen", "0.0.0.0:7070"}, "--insecure"},
      {{"--listen", "unix:relative.sock"}, "expected unix:/absolute/path"},
      {{"--listen", "unix:"}, "expected unix:/absolute/path"},
      {{"--listen", "unix:/run/gpuctl/"}, "expected unix:/absolute/path"},
      {{"--listen", "unix:/" + std::string(120, 'p')}, "at most 107 bytes"},
      {{"--listen", "unix:/tmp/same.sock", "--socket", "/tmp/same.sock"},
       "must be different files"},
      {{"--listen-mode", "0999"}, "--listen-mode"},
      {{"--listen-group", "no group"}, "--listen-group"},
      {{"--socket", ""}, "--socket"},
      {{"--host-name", ""}, "--host-name: a host name must not be empty"},
      {{"--host-name", "node/1"}, "--host-name: \"node/1\" holds \"/\""},
      {{"--host-name", std::string(300, 'h')}, "300 bytes long, more than 253"},
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

TEST(DaemonOptionsTest, AUnixSocketListenIsLocalAndTakesAModeAndGroup) {
  Parsed p = Parse(
      {"--listen", "unix:/run/gpuctl/api.sock", "--listen-mode", "0660", "--listen-group", "0"});
  ASSERT_TRUE(p.flags.options.has_value()) << p.err;
  EXPECT_EQ(p.flags.options->listen_address, "unix:/run/gpuctl/api.sock");
  EXPECT_EQ(p.flags.options->listen_mode, 0660u);
  EXPECT_EQ(p.flags.options->listen_gid, std::optional<uint32_t>(0));
  EXPECT_EQ(UnixListenPath("unix:///run/x.sock"), "/run/x.sock");
  EXPECT_EQ(UnixListenPath("127.0.0.1:7070"), "");
  EXPECT_TRUE(IsLoopbackListen("unix:/run/x.sock"));
  // Owner-only unless told otherwise.
  EXPECT_EQ(Parse({"--listen", "unix:/run/x.sock"}).flags.options->listen_mode, 0600u);
}

TEST(DaemonOptionsTest, VersionAndHelpExitWithZero) {
  Parsed version = Parse({"--version"});
  EXPECT_FALSE(version.flags.options.has_value());
  EXPECT_EQ(version.flags.exit_code, 0);
  EXPECT_THAT(version.out, HasSubstr("gpuctld "));
  Parsed help = Parse({"--help"});
  EXPECT_EQ(help.flags.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--ready-file"));
  EXPECT_THAT(help.out, HasSubstr("--config"));
  EXPECT_THAT(help.out, HasSubstr("--store-max-age"));
}

TEST(ParseHumanDurationTest, AcceptsUnitsAndRejectsTheRest) {
  EXPECT_EQ(*ParseHumanDuration("500ms"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseHumanDuration("1.5s"), absl::Milliseconds(1500));
  EXPECT_EQ(*ParseHumanDuration("10m"), absl::Minutes(10));
  for (const char* bad : {"", "5", "s", "-1s", "+1s", "inf", "1 s", "0ms", "1d"}) {
    EXPECT_FALSE(ParseHumanDuration(bad).ok()) << bad;
  }
}

// --config: the file's values, overridden by the flags given.
class DaemonConfigFlagTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuctld-config-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string WriteConfig(const std::string& text) {
    std::string path = dir_ + "/gpuctld.yaml";
    std::ofstream(path, std::ios::trunc) << text;
    return path;
  }
  // Parses `args` after --config with `yaml`.
  Parsed ParseWith(const std::string& yaml, std::vector<std::string> args = {},
                   const char* socket_env = nullptr) {
    args.insert(args.begin(), {"--config", WriteConfig(yaml)});
    return Parse(args, socket_env);
  }
  std::string dir_;
};

constexpr char kFullConfig[] =
    "listen: 127.0.0.1:7171\n"
    "host_name: file-node\n"
    "socket: /tmp/file.sock\n"
    "log_level: warning\n"
    "ready_file: /tmp/file.ready\n"
    "trace:\n"
    "  max_duration: 20m\n"
    "  start_delay: 0\n"
    "  result_grace: 30s\n"
    "  max_payload_bytes: 512MiB\n"
    "  max_buffer_bytes: 256MiB\n"
    "store:\n"
    "  path: /tmp/file-store\n"
    "  retention: {max_bytes: 1GiB, max_age: 2d, max_count: 10}\n"
    "  s3:\n"
    "    endpoint: http://rgw.example.com\n"
    "    region: default\n"
    "    bucket: traces\n";

TEST_F(DaemonConfigFlagTest, TheFileSetsWhatNoFlagGives) {
  Parsed p = ParseWith(kFullConfig);
  ASSERT_TRUE(p.flags.options.has_value()) << p.err;
  const DaemonOptions& o = *p.flags.options;
  EXPECT_EQ(o.listen_address, "127.0.0.1:7171");
  EXPECT_EQ(o.host_name, "file-node");
  EXPECT_EQ(o.socket_path, "/tmp/file.sock");
  EXPECT_EQ(o.log_level, LogLevel::kWarning);
  EXPECT_EQ(o.ready_file, "/tmp/file.ready");
  EXPECT_EQ(o.max_duration, absl::Minutes(20));
  EXPECT_EQ(o.start_delay, absl::ZeroDuration());
  EXPECT_EQ(o.result_grace, absl::Seconds(30));
  EXPECT_EQ(o.max_payload_bytes, uint64_t{512} << 20);
  EXPECT_EQ(o.max_buffer_bytes, uint64_t{256} << 20);
  EXPECT_EQ(o.store_dir, "/tmp/file-store");
  EXPECT_EQ(o.retention.max_bytes, uint64_t{1} << 30);
  EXPECT_EQ(o.retention.max_age, absl::Hours(48));
  EXPECT_EQ(o.retention.max_count, 10u);
  ASSERT_TRUE(o.s3.has_value());
  EXPECT_EQ(o.s3->endpoint, "http://rgw.example.com");
  EXPECT_EQ(o.s3->bucket, "traces");
}

TEST_F(DaemonConfigFlagTest, FlagsGivenOverrideTheFile) {
  // Values equal to the built-in defaults still win: given is given.
  Parsed p = ParseWith(kFullConfig, {"--listen",          "127.0.0.1:7070",
                                     "--host-name",       "flag-node",
                                     "--socket",          "/tmp/flag.sock",
                                     "--log-level",       "info",
                                     "--ready-file",      "",
                                     "--max-duration",    "10m",
                                     "--start-delay",     "100ms",
                                     "--result-grace",    "1h30m",
                                     "--store",           "/var/lib/gpuctl/traces",
                                     "--store-max-bytes", "50GiB",
                                     "--store-max-age",   "0",
                                     "--store-max-count", "7"});
  ASSERT_TRUE(p.flags.options.has_value()) << p.err;
  const DaemonOptions& o = *p.flags.options;
  EXPECT_EQ(o.listen_address, "127.0.0.1:7070");
  EXPECT_EQ(o.host_name, "flag-node");
  EXPECT_EQ(o.socket_path, "/tmp/flag.sock");
  EXPECT_EQ(o.log_level, LogLevel::kInfo);
  EXPECT_EQ(o.ready_file, "");
  EXPECT_EQ(o.max_duration, absl::Minutes(10));
  EXPECT_EQ(o.start_delay, absl::Milliseconds(100));
  EXPECT_EQ(o.result_grace, absl::Minutes(90));
  EXPECT_EQ(o.store_dir, "/var/lib/gpuctl/traces");
  EXPECT_EQ(o.retention.max_bytes, uint64_t{50} << 30);
  EXPECT_EQ(o.retention.max_age, absl::ZeroDuration());
  EXPECT_EQ(o.retention.max_count, 7u);
  // What no flag covers stays as the file has it.
  EXPECT_EQ(o.max_payload_bytes, uint64_t{512} << 20);
  EXPECT_TRUE(o.s3.has_value());
}

TEST_F(DaemonConfigFlagTest, OneFlagLeavesTheRestOfTheFile) {
  Parsed p = ParseWith(kFullConfig, {"--store-max-age", "12h"});
  ASSERT_TRUE(p.flags.options.has_value()) << p.err;
  EXPECT_EQ(p.flags.options->retention.max_age, absl::Hours(12));
  EXPECT_EQ(p.flags.options->retention.max_bytes, uint64_t{1} << 30);
  EXPECT_EQ(p.flags.options->retention.max_count, 10u);
  EXPECT_EQ(p.flags.options->store_dir, "/tmp/file-store");
}

TEST_F(DaemonConfigFlagTest, SocketFromFlagThenFileThenEnvironment) {
  EXPECT_EQ(ParseWith("{}", {}, "/tmp/env.sock").flags.options->socket_path, "/tmp/env.sock");
  EXPECT_EQ(ParseWith("socket: /tmp/file.sock\n", {}, "/tmp/env.sock").flags.options->socket_path,
            "/tmp/file.sock");
  EXPECT_EQ(ParseWith("socket: /tmp/file.sock\n", {"--socket", "/tmp/flag.sock"}, "/tmp/env.sock")
                .flags.options->socket_path,
            "/tmp/flag.sock");
}

TEST_F(DaemonConfigFlagTest, AnEmptyFileIsTheDefaults) {
  Parsed p = ParseWith("");
  ASSERT_TRUE(p.flags.options.has_value()) << p.err;
  EXPECT_EQ(p.flags.options->store_dir, kDefaultStoreDir);
  EXPECT_EQ(p.flags.options->retention.max_count, 100000u);
}

TEST_F(DaemonConfigFlagTest, FileErrorsExitWithTwoNamingFileLineAndKey) {
  Parsed p = ParseWith("store:\n  retention:\n    max_age: 3x\n");
  EXPECT_FALSE(p.flags.options.has_value());
  EXPECT_EQ(p.flags.exit_code, 2);
  EXPECT_EQ(p.err, absl::StrCat("gpuctld: ", dir_,
                                "/gpuctld.yaml:3: store.retention.max_age: \"3x\" is not a "
                                "duration (use 100ms, 10s, 10m, 2h, 30d)\n"));
  // A file error is reported even when a flag would replace the value.
  Parsed overridden = ParseWith("store:\n  path: [a]\n", {"--store", "/tmp/s"});
  EXPECT_EQ(overridden.flags.exit_code, 2);
  EXPECT_THAT(overridden.err, HasSubstr("gpuctld.yaml:2: store.path: expected a string"));
  Parsed missing = Parse({"--config", dir_ + "/none.yaml"});
  EXPECT_EQ(missing.flags.exit_code, 2);
  EXPECT_EQ(missing.err, absl::StrCat("gpuctld: cannot read config file ", dir_,
                                      "/none.yaml: No such file or directory\n"));
}

TEST_F(DaemonConfigFlagTest, ListenFromTheFileIsCheckedWithTheFlags) {
  Parsed shape = ParseWith("\nlisten: nohost\n");
  EXPECT_EQ(shape.flags.exit_code, 2);
  EXPECT_THAT(shape.err, HasSubstr("gpuctld.yaml:2: listen: \"nohost\": expected HOST:PORT"));
  Parsed open = ParseWith("listen: 0.0.0.0:7070\n");
  EXPECT_EQ(open.flags.exit_code, 2);
  EXPECT_THAT(open.err, HasSubstr("gpuctld.yaml:1: listen: refusing to serve 0.0.0.0:7070 "
                                  "without transport security; listen on a loopback address or "
                                  "configure tls (cert, key), or set insecure: true (or pass "
                                  "--insecure)"));
  EXPECT_TRUE(ParseWith("listen: 0.0.0.0:7070\ninsecure: true\n").flags.options.has_value());
  EXPECT_TRUE(ParseWith("listen: 0.0.0.0:7070\n", {"--insecure"}).flags.options.has_value());
  // The flag replaces the file's address before it is checked.
  EXPECT_TRUE(
      ParseWith("listen: 0.0.0.0:7070\n", {"--listen", "127.0.0.1:0"}).flags.options.has_value());
  Parsed flag = ParseWith("insecure: false\n", {"--listen", "0.0.0.0:1"});
  EXPECT_THAT(flag.err, HasSubstr("pass --insecure"));
}

TEST_F(DaemonConfigFlagTest, TlsAndAuthFromFileAndFlags) {
  Parsed file = ParseWith(
      "listen: 0.0.0.0:7070\ntls:\n  cert: /c.pem\n  key: /k.pem\n  client_ca: /ca.pem\n"
      "auth:\n  token_file: /t\n");
  ASSERT_TRUE(file.flags.options.has_value()) << file.err;
  EXPECT_EQ(file.flags.options->tls_cert, "/c.pem");
  EXPECT_EQ(file.flags.options->tls_key, "/k.pem");
  EXPECT_EQ(file.flags.options->tls_client_ca, "/ca.pem");
  EXPECT_EQ(file.flags.options->auth_token_file, "/t");
  // Flags win over the file.
  Parsed flags = ParseWith("tls:\n  cert: /c.pem\n  key: /k.pem\n",
                           {"--tls-cert", "/x.pem", "--auth-token-file", "/tok"});
  ASSERT_TRUE(flags.flags.options.has_value()) << flags.err;
  EXPECT_EQ(flags.flags.options->tls_cert, "/x.pem");
  EXPECT_EQ(flags.flags.options->tls_key, "/k.pem");
  EXPECT_EQ(flags.flags.options->auth_token_file, "/tok");
}

TEST_F(DaemonConfigFlagTest, TlsSettingsAreCheckedTogether) {
  Parsed no_key = Parse({"--tls-cert", "/c.pem"});
  EXPECT_EQ(no_key.flags.exit_code, 2);
  EXPECT_THAT(no_key.err, HasSubstr("TLS needs both a certificate and its key"));
  Parsed ca_only = Parse({"--tls-client-ca", "/ca.pem"});
  EXPECT_EQ(ca_only.flags.exit_code, 2);
  EXPECT_THAT(ca_only.err, HasSubstr("--tls-client-ca (tls.client_ca) requires TLS"));
  Parsed empty = Parse({"--auth-token-file", ""});
  EXPECT_THAT(empty.err, HasSubstr("--auth-token-file is empty"));
  Parsed empty_key = ParseWith("tls:\n  cert: \"\"\n");
  EXPECT_THAT(empty_key.err, HasSubstr("gpuctld.yaml:2: tls.cert: must not be empty"));
  Parsed unknown = ParseWith("tls:\n  certificate: /c.pem\n");
  EXPECT_EQ(unknown.flags.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("tls.certificate"));
}

TEST_F(DaemonConfigFlagTest, TlsAllowsNonLoopbackListen) {
  Parsed plain = Parse({"--listen", "0.0.0.0:0"});
  EXPECT_EQ(plain.flags.exit_code, 2);
  EXPECT_THAT(plain.err, HasSubstr("refusing to serve 0.0.0.0:0"));
  Parsed tls = Parse({"--listen", "0.0.0.0:0", "--tls-cert", "/c.pem", "--tls-key", "/k.pem"});
  EXPECT_TRUE(tls.flags.options.has_value()) << tls.err;
}

std::string ReadText(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs gpuctld with `args`, its stderr to `stderr_path`.
TEST_F(DaemonConfigFlagTest, CheckConfigPrintsOkAndStartsNothing) {
  const std::string config = WriteConfig(kFullConfig);
  Parsed p = Parse({"--check-config", config});
  EXPECT_FALSE(p.flags.options.has_value());
  EXPECT_EQ(p.flags.exit_code, 0) << p.err;
  EXPECT_EQ(p.out, absl::StrCat("gpuctld: ", config, ": OK\n"));
  EXPECT_EQ(p.err, "");
}

TEST_F(DaemonConfigFlagTest, CheckConfigReportsTheParsersError) {
  const std::string bad_key = WriteConfig("trace:\n  max_durration: 10m\n");
  Parsed key = Parse({"--check-config", bad_key});
  EXPECT_FALSE(key.flags.options.has_value());
  EXPECT_EQ(key.flags.exit_code, 2);
  EXPECT_THAT(key.err, StartsWith(absl::StrCat("gpuctld: ", bad_key,
                                               ":2: trace.max_durration: "
                                               "unknown key")));
  EXPECT_EQ(key.out, "");

  const std::string bad_value = WriteConfig("store:\n  retention:\n    max_age: 3x\n");
  Parsed value = Parse({"--check-config", bad_value});
  EXPECT_EQ(value.flags.exit_code, 2);
  EXPECT_THAT(value.err,
              StartsWith(absl::StrCat("gpuctld: ", bad_value, ":3: store.retention.max_age:")));
}

TEST_F(DaemonConfigFlagTest, CheckConfigChecksTheFlagsWithTheFile) {
  // What a deployment runs: the file and the flags that override it.
  const std::string config = WriteConfig("listen: 127.0.0.1:7070\n");
  Parsed insecure = Parse({"--check-config", config, "--listen=0.0.0.0:7070"});
  EXPECT_EQ(insecure.flags.exit_code, 2);
  EXPECT_THAT(insecure.err, HasSubstr("without transport security"));
  Parsed tls = Parse(
      {"--check-config", config, "--listen=0.0.0.0:7070", "--tls-cert=/c.pem", "--tls-key=/c.key"});
  EXPECT_EQ(tls.flags.exit_code, 0) << tls.err;
  EXPECT_EQ(Parse({"--check-config", ""}).flags.exit_code, 2);
  // One file: --config and --check-config together is a usage error.
  Parsed both = Parse({"--check-config", config, "--config", config});
  EXPECT_EQ(both.flags.exit_code, 2);
  EXPECT_FALSE(both.flags.options.has_value());
}

pid_t SpawnGpuctld(const std::vector<std::string>& args, const std::string& stderr_path) {
  std::vector<std::string> all = {GPUCTLD_PATH};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(all.size() + 1);
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

int WaitGpuctld(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F(DaemonConfigFlagTest, BinaryStartsFromTheFile) {
  std::string ready = dir_ + "/ready";
  std::string config = WriteConfig(absl::StrCat("listen: 127.0.0.1:0\nsocket: ", dir_,
                                                "/run/gpuctl.sock\nready_file: ", ready,
                                                "\nstore:\n  path: ", dir_, "/traces\n"));
  pid_t pid = SpawnGpuctld({"--config", config}, dir_ + "/stderr");
  ASSERT_GT(pid, 0);
  absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!std::filesystem::exists(ready) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(std::filesystem::exists(ready)) << ReadText(dir_ + "/stderr");
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/run/gpuctl.sock"));
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  EXPECT_EQ(WaitGpuctld(pid), 0);
}

TEST_F(DaemonConfigFlagTest, BinaryRefusesABadFileBeforeStartingAnything) {
  std::string config =
      WriteConfig(absl::StrCat("socket: ", dir_, "/run/gpuctl.sock\nstore:\n  path: ", dir_,
                               "/traces\n  retention:\n    max_bytes: -1\n"));
  pid_t pid = SpawnGpuctld({"--config", config}, dir_ + "/stderr");
  ASSERT_GT(pid, 0);
  EXPECT_EQ(WaitGpuctld(pid), 2);
  EXPECT_EQ(ReadText(dir_ + "/stderr"),
            absl::StrCat("gpuctld: ", config,
                         ":5: store.retention.max_bytes: \"-1\" is negative; a size is 0 or more "
                         "bytes\n"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/run"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/traces"));
}

TEST_F(DaemonConfigFlagTest, BinaryChecksAFileAndExits) {
  const std::string good = dir_ + "/good.yaml";
  std::ofstream(good) << "socket: " << dir_ << "/run/gpuctl.sock\nstore:\n  path: " << dir_
                      << "/traces\n";
  pid_t pid = SpawnGpuctld({"--check-config", good}, dir_ + "/stderr");
  ASSERT_GT(pid, 0);
  EXPECT_EQ(WaitGpuctld(pid), 0) << ReadText(dir_ + "/stderr");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/run"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/traces"));

  const std::string bad = WriteConfig("ipc:\n  socket_mode: \"0999\"\n");
  pid = SpawnGpuctld({"--check-config", bad}, dir_ + "/stderr");
  ASSERT_GT(pid, 0);
  EXPECT_EQ(WaitGpuctld(pid), 2);
  EXPECT_THAT(ReadText(dir_ + "/stderr"),
              StartsWith(absl::StrCat("gpuctld: ", bad, ":2: ipc.socket_mode:")));
}

TEST_F(DaemonConfigFlagTest, BinaryRefusesARuleAboveTheDutyCycleCeiling) {
  std::string config = WriteConfig(
      absl::StrCat("socket: ", dir_, "/run/gpuctl.sock\nstore:\n  path: ", dir_,
                   "/traces\nschedule:\n  seed: s\n  rules:\n    - name: busy\n"
                   "      selector: {job: \"42\"}\n      period: 1m\n      window: 30s\n"
                   "      probability: 0.5\n"));
  pid_t pid = SpawnGpuctld({"--config", config}, dir_ + "/stderr");
  ASSERT_GT(pid, 0);
  EXPECT_EQ(WaitGpuctld(pid), 2);
  EXPECT_EQ(ReadText(dir_ + "/stderr"),
            absl::StrCat("gpuctld: ", config,
                         ":6: schedule.rules: rule \"busy\": duty cycle 0.25 (probability x "
                         "window / period) is above max_duty_cycle 0.05\n"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/run"));
}

}  // namespace
}  // namespace gpuctl::daemon
