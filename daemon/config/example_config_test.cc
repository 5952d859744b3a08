// Keeps the shipped example (deploy/config/gpuctld.yaml), its Kubernetes
// ConfigMap and docs/configuration.md in step with the schema.
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/config/daemon_config.h"
#include "daemon/config/testing/expect_options.h"
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
// The schedule section is documented (docs/configuration.md) but not yet
// in the shipped example and ConfigMap, which change together with the
// deployment files; remove this once they show it.
constexpr char kNotInExampleYet[] = "schedule.";

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
    if (absl::StartsWith(key, kNotInExampleYet)) continue;
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
  for (const char* flag :
       {"--config", "--listen", "--host-name", "--insecure", "--socket", "--log-level",
        "--ready-file", "--max-duration", "--start-delay", "--result-grace", "--store",
        "--store-max-bytes", "--store-max-age", "--store-max-count", "--socket-mode",
        "--socket-group", "--max-ingest-bytes", "--hello-rate", "--hello-burst"}) {
    EXPECT_NE(docs.find(absl::StrCat("`", flag)), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace gpuctl::daemon
