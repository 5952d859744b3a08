#include "daemon/s3/s3_config.h"

#include "gtest/gtest.h"

namespace gpuctl::s3 {
namespace {

S3Config Valid() {
  S3Config c;
  c.endpoint = "https://s3.example.com";
  c.region = "us-east-1";
  c.bucket = "gpuctl-traces";
  return c;
}

TEST(S3EndpointTest, ParsesSchemeHostAndPort) {
  auto e = ParseS3Endpoint("http://127.0.0.1:7480/");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->scheme, "http");
  EXPECT_EQ(e->host, "127.0.0.1");
  EXPECT_EQ(e->port, "7480");
  EXPECT_TRUE(e->host_is_ip);
  EXPECT_EQ(e->Origin(), "http://127.0.0.1:7480");

  e = ParseS3Endpoint("HTTPS://S3.Example.com");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->Origin("b."), "https://b.s3.example.com");
  EXPECT_FALSE(e->host_is_ip);

  e = ParseS3Endpoint("http://[::1]:9000");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->host, "[::1]");
  EXPECT_TRUE(e->host_is_ip);
  EXPECT_EQ(e->Origin(), "http://[::1]:9000");
}

TEST(S3EndpointTest, RejectsWhatIsNotAnOrigin) {
  for (const char* bad :
       {"", "s3.example.com", "ftp://h", "http://", "http://h/path", "http://h?x=1", "http://u@h",
        "http://h:0", "http://h:65536", "http://h:", "http://h:80x", "http://-h", "http://h..x",
        "http://[::1", "http://[zz]:1", "http://h h"}) {
    EXPECT_FALSE(ParseS3Endpoint(bad).ok()) << bad;
  }
}

TEST(S3ConfigTest, AcceptsDefaults) { EXPECT_TRUE(ValidateS3Config(Valid()).ok()); }

TEST(S3ConfigTest, RejectsBadFields) {
  auto expect_bad = [](S3Config c, const char* what) {
    absl::Status st = ValidateS3Config(c);
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << what << ": " << st;
  };
  S3Config c = Valid();
  c.region = "";
  expect_bad(c, "empty region");
  c = Valid();
  c.region = "us:east";
  expect_bad(c, "region with ':'");
  for (const char* bucket : {"ab", "Upper", "-lead", "trail-", "a..b", "192.168.1.1", "a_b"}) {
    c = Valid();
    c.bucket = bucket;
    expect_bad(c, bucket);
  }
  c = Valid();
  c.endpoint = "http://10.0.0.1:7480";
  expect_bad(c, "virtual-hosted on an IP");
  c.path_style = true;
  EXPECT_TRUE(ValidateS3Config(c).ok());
  for (const char* prefix : {"/lead", "trail/", "a//b", "tab\there"}) {
    c = Valid();
    c.prefix = prefix;
    expect_bad(c, prefix);
  }
  c = Valid();
  c.part_size = kMinPartSize - 1;
  expect_bad(c, "small part");
  c = Valid();
  c.multipart_threshold = kMaxPartSize + 1;
  expect_bad(c, "huge threshold");
  c = Valid();
  c.max_attempts = 0;
  expect_bad(c, "no attempts");
  c = Valid();
  c.idle_timeout = absl::ZeroDuration();
  expect_bad(c, "zero idle timeout");
}

TEST(S3ConfigTest, ObjectKeys) {
  EXPECT_TRUE(ValidateObjectKey("a/b c/ü.json").ok());
  EXPECT_FALSE(ValidateObjectKey("").ok());
  EXPECT_FALSE(ValidateObjectKey("a\nb").ok());
  EXPECT_FALSE(ValidateObjectKey(std::string(kMaxKeyLength + 1, 'k')).ok());
  EXPECT_TRUE(ValidateObjectKey(std::string(kMaxKeyLength, 'k')).ok());
}

}  // namespace
}  // namespace gpuctl::s3
