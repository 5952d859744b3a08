#include "cli/channel_security.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::cli {
namespace {

using ::testing::HasSubstr;

class ChannelSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpuctl-chsec-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& content) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << content;
    return path;
  }
  std::string dir_;
};

TEST_F(ChannelSecurityTest, PlainTextByDefault) {
  absl::StatusOr<ChannelSecurity> s = ResolveChannelSecurity({}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->tls);
  EXPECT_EQ(s->credentials, nullptr);
  EXPECT_TRUE(s->token.empty());
}

TEST_F(ChannelSecurityTest, TlsFlagOrAnyTlsFileTurnsTlsOn) {
  SecurityFlags flags;
  flags.tls = true;
  absl::StatusOr<ChannelSecurity> system_roots = ResolveChannelSecurity(flags, {});
  ASSERT_TRUE(system_roots.ok()) << system_roots.status();
  EXPECT_TRUE(system_roots->tls);
  EXPECT_NE(system_roots->credentials, nullptr);

  SecurityFlags env;
  env.ca = Write("ca.pem", "-----BEGIN CERTIFICATE-----\n");
  absl::StatusOr<ChannelSecurity> from_env = ResolveChannelSecurity({}, env);
  ASSERT_TRUE(from_env.ok()) << from_env.status();
  EXPECT_TRUE(from_env->tls);
}

TEST_F(ChannelSecurityTest, FlagsWinOverTheEnvironment) {
  SecurityFlags flags;
  flags.token_file = Write("flag.token", "from-flag\n");
  SecurityFlags env;
  env.token_file = Write("env.token", "from-env\n");
  absl::StatusOr<ChannelSecurity> s = ResolveChannelSecurity(flags, env);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->token, "from-flag");
  EXPECT_EQ(ResolveChannelSecurity({}, env)->token, "from-env");
}

TEST_F(ChannelSecurityTest, BadSettingsNameTheFlag) {
  SecurityFlags cert_only;
  cert_only.cert = Write("c.pem", "x");
  EXPECT_THAT(ResolveChannelSecurity(cert_only, {}).status().message(),
              HasSubstr("--tls-cert and --tls-key go together"));
  SecurityFlags name_only;
  name_only.server_name = "gpuctld.example";
  EXPECT_THAT(ResolveChannelSecurity(name_only, {}).status().message(),
              HasSubstr("--tls-server-name needs TLS"));
  SecurityFlags missing;
  missing.ca = dir_ + "/absent.pem";
  EXPECT_THAT(ResolveChannelSecurity(missing, {}).status().message(),
              HasSubstr("--tls-ca: cannot read"));
  SecurityFlags empty_token;
  empty_token.token_file = Write("empty", "\n");
  EXPECT_THAT(ResolveChannelSecurity(empty_token, {}).status().message(), HasSubstr("is empty"));
  SecurityFlags spaced;
  spaced.token_file = Write("spaced", "two words");
  EXPECT_THAT(ResolveChannelSecurity(spaced, {}).status().message(), HasSubstr("printable ASCII"));
}

}  // namespace
}  // namespace gpuctl::cli
