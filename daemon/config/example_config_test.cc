// Keeps the shipped example (deploy/config/gpuctld.yaml), its Kubernetes
// ConfigMap and docs/configuration.md in step with the schema.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/config/daemon_config.h"
#include "daemon/config/testing/expect_options.h"
#include "daemon/scheduler/schedule_options.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "yaml-cpp/yaml.h"

namespace gpuctl::daemon {
namespace {

using ::gpuctl::daemon::testing::ExpectSameOptions;
using ::gpuctl::daemon::testing::ExpectSameS3Config;

constexpr char kExamplePath[] = GPUCTL_SOURCE_DIR "/deploy/config/gpuctld.yaml";
constexpr char kConfigMapPath[] =
    GPUCTL_SOURCE_DIR "/deploy/kubernetes/daemonset/base/configmap.yaml";
constexpr char kDocsPath[] = GPUCTL_SOURCE_DIR "/docs/configuration.md";
std::string ReadSourceFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A commented-out setting, "  # key: value" at any depth, turned on;
// explanations ("# Text", "#   # text") stay as they are.
std::string UncommentSetting(const std::string& line) {
  size_t hash = line.find_first_not_of(' ');
  if (hash == std::string::npos || line.compare(hash, 2, "# ") != 0) return line;
  std::string setting = line.substr(hash + 2);
  size_t name = setting.find_first_not_of(' ');
  // A list entry's first key ("- name: x") is a setting too.
  if (name != std::string::npos && setting.compare(name, 2, "- ") == 0) name += 2;
  size_t colon = setting.find(':', name == std::string::npos ? 0 : name);
  if (name == std::string::npos || colon == std::string::npos || colon == name) return line;
  for (size_t i = name; i < colon; ++i) {
    char c = setting[i];
    if (!(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') && c != '_') return line;
  }
  if (colon + 1 < setting.size() && setting[colon + 1] != ' ') return line;
  return line.substr(0, hash) + setting;
}

std::string Uncommented(const std::string& text) {
  std::istringstream in(text);
  std::string out, line;
  while (std::getline(in, line)) absl::StrAppend(&out, UncommentSetting(line), "\n");
  return out;
}

TEST(ExampleConfigTest, OnlySettingsAreUncommented) {
  EXPECT_EQ(UncommentSetting("  # s3:"), "  s3:");
  EXPECT_EQ(UncommentSetting("  #   endpoint: https://h"), "    endpoint: https://h");
  EXPECT_EQ(UncommentSetting("  #   # Objects: keys"), "  #   # Objects: keys");
  EXPECT_EQ(UncommentSetting("# Durations: a whole number"), "# Durations: a whole number");
  EXPECT_EQ(UncommentSetting("# zero). Sizes: bytes"), "# zero). Sizes: bytes");
  EXPECT_EQ(UncommentSetting("# see http://x"), "# see http://x");
  EXPECT_EQ(UncommentSetting("listen: x"), "listen: x");
  EXPECT_EQ(UncommentSetting("#     - name: vision"), "    - name: vision");
  EXPECT_EQ(UncommentSetting("#   - see below"), "#   - see below");
  EXPECT_EQ(UncommentSetting("#     - name: hourly"), "    - name: hourly");
  EXPECT_EQ(UncommentSetting("#     # - a list, explained"), "#     # - a list, explained");
}

TEST(ExampleConfigTest, TheExampleLoadsAsTheDefaults) {
  DaemonOptions options;
  absl::StatusOr<ConfigLocations> where =
      ParseDaemonConfig(ReadSourceFile(kExamplePath), "gpuctld.yaml", &options);
  ASSERT_TRUE(where.ok()) << where.status();
  ExpectSameOptions(options, DaemonOptions{});
}

TEST(ExampleConfigTest, TheExampleShowsEveryKeyAndTheS3Defaults) {
  std::string text = Uncommented(ReadSourceFile(kExamplePath));
  DaemonOptions options;
  absl::StatusOr<ConfigLocations> where = ParseDaemonConfig(text, "gpuctld.yaml", &options);
  ASSERT_TRUE(where.ok()) << where.status() << "\n" << text;
  for (const std::string& key : DaemonConfigKeys()) {
    EXPECT_NE(where->Line(key), 0) << key << " is missing from deploy/config/gpuctld.yaml";
  }
  // Only where to upload is an example; every other value is the default.
  ASSERT_TRUE(options.s3.has_value());
  s3::S3Config expected;
  expected.endpoint = "https://s3.us-east-1.amazonaws.com";
  expected.region = "us-east-1";
  expected.bucket = "gpuctl-traces";
  expected.prefix = "gpuctl";
  expected.credentials_file = "/etc/gpuctl/s3-credentials";
  ExpectSameS3Config(*options.s3, expected);
  options.s3.reset();
  // Who may attach: examples too (names resolved at startup, not here).
  EXPECT_EQ(options.socket_group, "gpuctl");
  EXPECT_EQ(options.allowed_users, (std::vector<std::string>{"1000", "alice"}));
  options.socket_group.clear();
  options.allowed_users.clear();
  EXPECT_EQ(options.host_name, "gpu-node-1");
  options.host_name.clear();
  EXPECT_EQ(options.auth_token_file, "/etc/gpuctl/token");
  ASSERT_EQ(options.auth_tokens.size(), 2u);
  EXPECT_EQ(options.auth_tokens[1].scope.jobs, std::vector<std::string>{"42"});
  options.auth_token_file.clear();
  options.auth_tokens.clear();
  // The schedule: a time rule and a step rule, within the default ceiling.
  const scheduler::ScheduleOptions& schedule = options.schedule;
  EXPECT_EQ(schedule.seed, "fleet-2026");
  EXPECT_EQ(schedule.max_duty_cycle, scheduler::kDefaultMaxDutyCycle);
  EXPECT_EQ(schedule.capture_time_per_day, absl::Minutes(30));
  EXPECT_EQ(schedule.min_free_store_bytes, uint64_t{10} << 30);
  ASSERT_EQ(schedule.rules.size(), 2u);
  const scheduler::ScheduleRule& hourly = schedule.rules[0];
  EXPECT_EQ(hourly.name, "hourly");
  EXPECT_EQ(hourly.selector.labels().at("team"), "ml");
  ASSERT_EQ(hourly.selector.ranks_size(), 1);
  EXPECT_EQ(hourly.selector.ranks(0).last(), 7);
  EXPECT_EQ(hourly.period, absl::Hours(1));
  EXPECT_EQ(hourly.window, absl::Seconds(10));
  EXPECT_EQ(hourly.activities, (std::vector<std::string>{"kernel", "memcpy"}));
  ASSERT_EQ(hourly.blackouts.size(), 1u);
  EXPECT_EQ(hourly.blackouts[0].days, 0b1100000);
  EXPECT_EQ(hourly.daily_cap, 4u);
  const scheduler::ScheduleRule& steps = schedule.rules[1];
  EXPECT_EQ(steps.selector.job_id(), "42");
  EXPECT_EQ(steps.step_period, 1000u);
  EXPECT_EQ(steps.window_steps, 5u);
  EXPECT_EQ(steps.min_step, 200u);
  EXPECT_TRUE(scheduler::ValidateSchedule(schedule).ok());
  options.schedule = {};
  // dynolog's RPC is off by default; the example shows its usual port.
  EXPECT_EQ(options.dyno_rpc_listen, "127.0.0.1:1778");
  options.dyno_rpc_listen.clear();
  // Metrics are off by default; the example shows the loopback address.
  EXPECT_EQ(options.metrics.listen, "127.0.0.1:9464");
  options.metrics.listen.clear();
  // The kineto socket's directory is derived from `socket` when absent.
  EXPECT_EQ(options.kineto_socket_dir, "/run/gpuctl/kineto");
  options.kineto_socket_dir.reset();
  ExpectSameOptions(options, DaemonOptions{});
}

TEST(ExampleConfigTest, TheConfigMapHoldsTheExample) {
  YAML::Node config_map = YAML::LoadFile(kConfigMapPath);
  EXPECT_EQ(config_map["kind"].as<std::string>(), "ConfigMap");
  EXPECT_EQ(config_map["metadata"]["namespace"].as<std::string>(), "gpuctl");
  EXPECT_EQ(config_map["data"]["gpuctld.yaml"].as<std::string>(), ReadSourceFile(kExamplePath));
}

TEST(ExampleConfigTest, TheDocsDescribeEveryKeyAndFlag) {
  std::string docs = ReadSourceFile(kDocsPath);
  for (const std::string& key : DaemonConfigKeys()) {
    EXPECT_NE(docs.find(absl::StrCat("| `", key, "` |")), std::string::npos)
        << key << " has no row in docs/configuration.md";
  }
  for (const char* flag : {"--config",
                           "--listen",
                           "--host-name",
                           "--insecure",
                           "--socket",
                           "--log-level",
                           "--ready-file",
                           "--max-duration",
                           "--start-delay",
                           "--result-grace",
                           "--store",
                           "--store-max-bytes",
                           "--store-max-age",
                           "--store-max-count",
                           "--socket-mode",
                           "--socket-group",
                           "--max-ingest-bytes",
                           "--hello-rate",
                           "--hello-burst",
                           "--metrics-listen",
                           "--metrics-allow-insecure"}) {
    EXPECT_NE(docs.find(absl::StrCat("`", flag)), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace gpuctl::daemon
