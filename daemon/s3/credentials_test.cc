#include "daemon/s3/credentials.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "gtest/gtest.h"

namespace gpuctl::s3 {
namespace {

namespace fs = std::filesystem;

constexpr char kFile[] = R"(# shared credentials
[default]
aws_access_key_id = AKIDDEFAULT
aws_secret_access_key = secret/default

; a second profile
[ profile ci ]
AWS_ACCESS_KEY_ID=AKIDCI
aws_secret_access_key=ci+secret=
aws_session_token = token-ci
other_key = ignored

[broken]
aws_access_key_id = AKIDBROKEN
)";

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(SharedCredentialsTest, ParsesProfiles) {
  auto def = ParseSharedCredentials(kFile, "default", "creds");
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(def->access_key_id, "AKIDDEFAULT");
  EXPECT_EQ(def->secret_access_key, "secret/default");
  EXPECT_EQ(def->session_token, "");

  auto ci = ParseSharedCredentials(kFile, "ci", "creds");
  ASSERT_TRUE(ci.ok()) << ci.status();
  EXPECT_EQ(ci->access_key_id, "AKIDCI");
  EXPECT_EQ(ci->secret_access_key, "ci+secret=");
  EXPECT_EQ(ci->session_token, "token-ci");
}

TEST(SharedCredentialsTest, ReportsWhatIsMissing) {
  auto missing = ParseSharedCredentials(kFile, "nope", "/etc/creds");
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_NE(missing.status().message().find("[nope]"), std::string::npos);
  EXPECT_NE(missing.status().message().find("/etc/creds"), std::string::npos);

  EXPECT_TRUE(absl::IsInvalidArgument(ParseSharedCredentials(kFile, "broken", "f").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseSharedCredentials("[x\n", "x", "f").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseSharedCredentials("[x]\njunk\n", "x", "f").status()));
}

TEST(CredentialsValidationTest, RejectsHeaderBreakingCharacters) {
  EXPECT_TRUE(ValidateCredentials({"AKID", "s/e+c=", "tok"}, "t").ok());
  EXPECT_FALSE(ValidateCredentials({"AK/ID", "s", ""}, "t").ok());
  EXPECT_FALSE(ValidateCredentials({"AK,ID", "s", ""}, "t").ok());
  EXPECT_FALSE(ValidateCredentials({"AKID", "s\r\nX: y", ""}, "t").ok());
  EXPECT_FALSE(ValidateCredentials({"AKID", "s", "tok\n"}, "t").ok());
  EXPECT_FALSE(ValidateCredentials({"", "s", ""}, "t").ok());
}

class CredentialsProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpuctl-s3-creds-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    file_ = dir_ + "/credentials";
    Write(kFile);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& text) {
    // Through a rename, as tools that rotate keys do.
    std::ofstream(file_ + ".new") << text;
    fs::rename(file_ + ".new", file_);
  }

  std::string dir_;
  std::string file_;
};

TEST_F(CredentialsProviderTest, ConfigBeatsFileBeatsEnvironment) {
  auto env = FakeEnv({{"AWS_ACCESS_KEY_ID", "AKIDENV"},
                      {"AWS_SECRET_ACCESS_KEY", "envsecret"},
                      {"AWS_SESSION_TOKEN", "envtoken"}});
  S3Config config;
  config.access_key_id = "AKIDCONF";
  config.secret_access_key = "confsecret";
  config.credentials_file = file_;
  auto p = CredentialsProvider::Create(config, env);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->Get().access_key_id, "AKIDCONF");
  EXPECT_EQ((*p)->source(), "config");

  config.access_key_id.clear();
  config.secret_access_key.clear();
  config.profile = "ci";
  p = CredentialsProvider::Create(config, env);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->Get().access_key_id, "AKIDCI");
  EXPECT_EQ((*p)->source(), "file " + file_ + " [ci]");

  config.credentials_file.clear();
  p = CredentialsProvider::Create(config, env);
  ASSERT_TRUE(p.ok()) << p.status();
  S3Credentials c = (*p)->Get();
  EXPECT_EQ(c.access_key_id, "AKIDENV");
  EXPECT_EQ(c.secret_access_key, "envsecret");
  EXPECT_EQ(c.session_token, "envtoken");
  EXPECT_EQ((*p)->source(), "environment");
}

TEST_F(CredentialsProviderTest, NoneOrHalfAreErrors) {
  S3Config config;
  auto none = CredentialsProvider::Create(config, FakeEnv({}));
  EXPECT_TRUE(absl::IsFailedPrecondition(none.status())) << none.status();
  EXPECT_NE(none.status().message().find("AWS_ACCESS_KEY_ID"), std::string::npos);
  auto half = CredentialsProvider::Create(config, FakeEnv({{"AWS_ACCESS_KEY_ID", "AKID"}}));
  EXPECT_TRUE(absl::IsFailedPrecondition(half.status())) << half.status();
  config.credentials_file = dir_ + "/missing";
  EXPECT_TRUE(absl::IsNotFound(CredentialsProvider::Create(config, FakeEnv({})).status()));
}

TEST_F(CredentialsProviderTest, RereadsTheFileWhenItChanges) {
  S3Config config;
  config.credentials_file = file_;
  auto p = CredentialsProvider::Create(config, FakeEnv({}));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->Get().access_key_id, "AKIDDEFAULT");

  Write("[default]\naws_access_key_id = AKIDROTATED\naws_secret_access_key = new\n");
  EXPECT_EQ((*p)->Get().access_key_id, "AKIDROTATED");

  // A broken file keeps the last good keys.
  Write("[default]\naws_access_key_id = AKIDHALF\n");
  EXPECT_EQ((*p)->Get().access_key_id, "AKIDROTATED");
}

}  // namespace
}  // namespace gpuctl::s3
