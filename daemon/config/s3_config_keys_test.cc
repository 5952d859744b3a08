// store.s3: required keys, each field checked by the S3 client's validation
// and reported at its line, credentials that go together, secrets kept out
// of messages.
#include <string>
#include <utility>
#include <vector>

#include "daemon/config/daemon_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kS3Head[] =
    "store:\n"
    "  s3:\n"
    "    endpoint: http://rgw.example.com:7480\n"
    "    region: us-east-1\n"
    "    bucket: traces\n";

absl::StatusOr<DaemonOptions> ParseS3(const std::string& extra) {
  DaemonOptions options;
  absl::StatusOr<ConfigLocations> where =
      ParseDaemonConfig(std::string(kS3Head) + extra, "gpuctl.yaml", &options);
  if (!where.ok()) return where.status();
  return options;
}

std::string S3Error(const std::string& extra) {
  absl::StatusOr<DaemonOptions> options = ParseS3(extra);
  return options.ok() ? "(accepted)" : std::string(options.status().message());
}

TEST(S3ConfigKeysTest, AbsentMeansLocalOnly) {
  DaemonOptions options;
  ASSERT_TRUE(ParseDaemonConfig("store:\n  path: /t\n", "gpuctl.yaml", &options).ok());
  EXPECT_FALSE(options.s3.has_value());
}

TEST(S3ConfigKeysTest, TheMinimalSectionKeepsTheClientDefaults) {
  absl::StatusOr<DaemonOptions> options = ParseS3("");
  ASSERT_TRUE(options.ok()) << options.status();
  ASSERT_TRUE(options->s3.has_value());
  s3::S3Config defaults;
  EXPECT_EQ(options->s3->endpoint, "http://rgw.example.com:7480");
  EXPECT_EQ(options->s3->region, "us-east-1");
  EXPECT_EQ(options->s3->bucket, "traces");
  EXPECT_EQ(options->s3->profile, defaults.profile);
  EXPECT_EQ(options->s3->path_style, defaults.path_style);
  EXPECT_EQ(options->s3->connect_timeout, defaults.connect_timeout);
  EXPECT_EQ(options->s3->part_size, defaults.part_size);
  EXPECT_EQ(options->s3->max_attempts, defaults.max_attempts);
}

TEST(S3ConfigKeysTest, EndpointRegionAndBucketAreRequired) {
  DaemonOptions options;
  EXPECT_EQ(ParseDaemonConfig("store:\n  s3:\n", "gpuctl.yaml", &options).status().message(),
            "gpuctl.yaml:2: store.s3: missing endpoint, region, bucket (required to store traces "
            "in S3)");
  EXPECT_EQ(
      ParseDaemonConfig("store:\n  s3: {bucket: traces, region: r}\n", "gpuctl.yaml", &options)
          .status()
          .message(),
      "gpuctl.yaml:2: store.s3: missing endpoint (required to store traces in S3)");
}

TEST(S3ConfigKeysTest, EachFieldIsCheckedAtItsLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"    endpoint: ftp://x\n", "gpuctl.yaml:6: store.s3.endpoint: set twice (first on line 3)"},
      {"    prefix: /gpuctl\n",
       "gpuctl.yaml:6: store.s3.prefix: S3 key prefix \"/gpuctl\" must not start or end with '/' "
       "or contain \"//\""},
      {"    part_size: 1MiB\n",
       "gpuctl.yaml:6: store.s3.part_size: S3 part_size 1048576 is outside [5 MiB, 5 GiB]"},
      {"    multipart_threshold: 6GiB\n",
       "gpuctl.yaml:6: store.s3.multipart_threshold: S3 multipart_threshold 6442450944 is "
       "outside [5 MiB, 5 GiB]"},
      {"    max_attempts: 0\n",
       "gpuctl.yaml:6: store.s3.max_attempts: S3 max_attempts must be 1-20"},
      {"    max_attempts: 21\n",
       "gpuctl.yaml:6: store.s3.max_attempts: S3 max_attempts must be 1-20"},
      {"    max_attempts: 99999999999\n",
       "gpuctl.yaml:6: store.s3.max_attempts: 99999999999 is out of range (0 to 1048576)"},
      {"    connect_timeout: 0\n",
       "gpuctl.yaml:6: store.s3.connect_timeout: \"0\" must be more than 0"},
      {"    path_style: 1\n",
       "gpuctl.yaml:6: store.s3.path_style: expected true or false, found \"1\""},
      {"    profile: \"\"\n", "gpuctl.yaml:6: store.s3.profile: must not be empty"},
      {"    ca_file: [a]\n", "gpuctl.yaml:6: store.s3.ca_file: expected a string, found a list"},
  };
  for (const auto& [extra, expected] : cases) EXPECT_EQ(S3Error(extra), expected) << extra;
}

TEST(S3ConfigKeysTest, EndpointRegionAndBucketAreCheckedByTheClient) {
  DaemonOptions options;
  auto error = [&options](const std::string& section) {
    return std::string(
        ParseDaemonConfig("store:\n  s3:\n" + section, "gpuctl.yaml", &options).status().message());
  };
  EXPECT_EQ(error("    endpoint: ftp://x\n"),
            "gpuctl.yaml:3: store.s3.endpoint: S3 endpoint \"ftp://x\": must start with http:// "
            "or https://");
  EXPECT_EQ(error("    endpoint: http://h/path\n"),
            "gpuctl.yaml:3: store.s3.endpoint: S3 endpoint \"http://h/path\": must be "
            "scheme://host[:port] without path, query or user");
  EXPECT_EQ(error("    bucket: Traces_2024\n"),
            "gpuctl.yaml:3: store.s3.bucket: S3 bucket \"Traces_2024\" is not a valid bucket name "
            "(3-63 of a-z 0-9 . -, starting and ending alphanumeric)");
  EXPECT_EQ(
      error("    region: us east\n"),
      "gpuctl.yaml:3: store.s3.region: S3 region \"us east\" may hold only letters, digits, - "
      "and _");
}

TEST(S3ConfigKeysTest, RulesAcrossFieldsAreReportedWhereTheyCanBeFixed) {
  DaemonOptions options;
  std::string ip =
      "store:\n  s3:\n    endpoint: http://127.0.0.1:7480\n    region: r\n"
      "    bucket: traces\n";
  EXPECT_EQ(ParseDaemonConfig(ip, "gpuctl.yaml", &options).status().message(),
            "gpuctl.yaml:3: store.s3.endpoint: S3 endpoint http://127.0.0.1:7480 is an IP "
            "address: virtual-hosted buckets need a DNS name; use path style");
  EXPECT_THAT(std::string(ParseDaemonConfig(ip + "    path_style: false\n", "gpuctl.yaml", &options)
                              .status()
                              .message()),
              StartsWith("gpuctl.yaml:6: store.s3.path_style: S3 endpoint"));
  EXPECT_TRUE(ParseDaemonConfig(ip + "    path_style: true\n", "gpuctl.yaml", &options).ok());
}

TEST(S3ConfigKeysTest, KeysFromTheFileGoTogether) {
  EXPECT_EQ(S3Error("    access_key_id: AKID\n"),
            "gpuctl.yaml:6: store.s3.access_key_id: access_key_id and secret_access_key go "
            "together; set both or neither");
  EXPECT_EQ(S3Error("    secret_access_key: s3cr3t\n"),
            "gpuctl.yaml:6: store.s3.secret_access_key: access_key_id and secret_access_key go "
            "together; set both or neither");
  EXPECT_EQ(S3Error("    session_token: t\n"),
            "gpuctl.yaml:6: store.s3.session_token: needs access_key_id and secret_access_key "
            "beside it");
  EXPECT_EQ(S3Error("    access_key_id: AK/ID\n    secret_access_key: s3cr3t\n"),
            "gpuctl.yaml:6: store.s3.access_key_id: S3 credentials from the file: access key id "
            "has a character other than printable ASCII without space, '/' and ','");
  absl::StatusOr<DaemonOptions> both = ParseS3(
      "    access_key_id: AKID\n    secret_access_key: s3cr3t\n"
      "    credentials_file: /etc/gpuctl/s3\n");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->s3->access_key_id, "AKID");
  EXPECT_EQ(both->s3->credentials_file, "/etc/gpuctl/s3");
}

TEST(S3ConfigKeysTest, UploadKeysDefaultAndParse) {
  absl::StatusOr<DaemonOptions> defaults = ParseS3("");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->s3_store.upload_wait, absl::Seconds(30));
  EXPECT_FALSE(defaults->s3_store.keep_local);
  EXPECT_EQ(defaults->s3_store.upload_retry_max, absl::Minutes(5));
  EXPECT_EQ(defaults->s3_store.shutdown_wait, absl::Seconds(30));

  absl::StatusOr<DaemonOptions> set = ParseS3(
      "    upload_wait: 0\n    keep_local: true\n    upload_retry_max: 90s\n"
      "    shutdown_wait: 90s\n");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->s3_store.upload_wait, absl::ZeroDuration());
  EXPECT_TRUE(set->s3_store.keep_local);
  EXPECT_EQ(set->s3_store.upload_retry_max, absl::Seconds(90));
  EXPECT_EQ(set->s3_store.shutdown_wait, absl::Seconds(90));

  absl::StatusOr<DaemonOptions> no_wait = ParseS3("    shutdown_wait: 0\n");
  ASSERT_TRUE(no_wait.ok()) << no_wait.status();
  EXPECT_EQ(no_wait->s3_store.shutdown_wait, absl::ZeroDuration());
}

TEST(S3ConfigKeysTest, UploadKeysAreValidated) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"    upload_wait: 2h\n",
       "gpuctl.yaml:6: store.s3.upload_wait: at most 1h (0 completes traces without waiting)"},
      {"    upload_wait: soon\n", "gpuctl.yaml:6: store.s3.upload_wait: "},
      {"    keep_local: yes please\n",
       "gpuctl.yaml:6: store.s3.keep_local: expected true or false, found \"yes please\""},
      {"    upload_retry_max: 0\n",
       "gpuctl.yaml:6: store.s3.upload_retry_max: \"0\" must be more than 0"},
      {"    upload_retry_max: 500ms\n",
       "gpuctl.yaml:6: store.s3.upload_retry_max: must be within [1s, 24h]"},
      {"    upload_retry_max: 25h\n",
       "gpuctl.yaml:6: store.s3.upload_retry_max: must be within [1s, 24h]"},
      {"    shutdown_wait: 61m\n",
       "gpuctl.yaml:6: store.s3.shutdown_wait: at most 1h (0 leaves pending uploads for the next "
       "start)"},
      {"    shutdown_wait: -1s\n", "gpuctl.yaml:6: store.s3.shutdown_wait: "},
      {"    shutdown_wait: [30s]\n", "gpuctl.yaml:6: store.s3.shutdown_wait: "},
  };
  for (const auto& [extra, expected] : cases) {
    EXPECT_THAT(S3Error(extra), StartsWith(expected)) << extra;
  }
}

TEST(S3ConfigKeysTest, SecretsNeverAppearInMessages) {
  for (const char* extra : {"    secret_access_key: \"hunter2\\tx\"\n    access_key_id: AKID\n",
                            "    access_key_id: \"hunter2\\tx\"\n",
                            "    access_key_id: AKID\n    secret_access_key: \"hunter2 x\"\n",
                            "    session_token: \"hunter2\\x01\"\n"}) {
    std::string message = S3Error(extra);
    EXPECT_THAT(message, StartsWith("gpuctl.yaml:")) << extra;
    EXPECT_THAT(message, Not(HasSubstr("hunter2"))) << message;
  }
  EXPECT_EQ(S3Error("    access_key_id: \"hunter2\\tx\"\n"),
            "gpuctl.yaml:6: store.s3.access_key_id: the value contains a control character");
}

}  // namespace
}  // namespace gpuctl::daemon
