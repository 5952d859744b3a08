// What goes over the wire: canonical URLs, x-amz-content-sha256, and
// libcurl's SigV4 signature checked against an independent implementation.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/s3/object_body.h"
#include "daemon/s3/s3_client.h"
#include "daemon/s3/s3_uri.h"
#include "daemon/s3/testing/loopback_http_server.h"
#include "daemon/s3/testing/s3_test_util.h"
#include "daemon/s3/testing/sigv4_verifier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::s3 {
namespace {

using testing::CannedResponse;
using ::testing::Contains;
using testing::ExpectedSigV4Authorization;
using testing::LoopbackHttpServer;
using testing::RecordedRequest;
using testing::SignedHeaders;

CannedResponse Ok() { return {}; }

// The documented AWS example ("GET Object" in "Signature Calculations for
// the Authorization Header"), which pins the verifier itself.
TEST(SigV4VerifierTest, MatchesAwsDocumentedExample) {
  RecordedRequest req;
  req.method = "GET";
  req.path = "/test.txt";
  req.headers = {{"host", "examplebucket.s3.amazonaws.com"},
                 {"range", "bytes=0-9"},
                 {"x-amz-content-sha256", std::string(kEmptySha256)},
                 {"x-amz-date", "20130524T000000Z"},
                 {"authorization",
                  "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
                  "aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                  "Signature=unknown"}};
  EXPECT_EQ(ExpectedSigV4Authorization(req, "AKIAIOSFODNN7EXAMPLE",
                                       "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(S3UriTest, EncodesPerRfc3986) {
  EXPECT_EQ(UriEncode("aZ09-._~ /+=&%é", false), "aZ09-._~%20%2F%2B%3D%26%25%C3%A9");
  EXPECT_EQ(UriEncode("a b/c", true), "a%20b/c");
  EXPECT_EQ(CanonicalQuery({{"uploads", ""}}), "uploads=");
  EXPECT_EQ(CanonicalQuery({{"uploadId", "x/y+z"}, {"partNumber", "10"}}),
            "partNumber=10&uploadId=x%2Fy%2Bz");
  // Sorted by encoded name, byte order: uppercase before lowercase.
  EXPECT_EQ(CanonicalQuery({{"b", "1"}, {"B", "2"}, {"a", "3"}}), "B=2&a=3&b=1");
}

void ExpectSignedCorrectly(const RecordedRequest& req) {
  EXPECT_EQ(req.HeaderCount("authorization"), 1);
  EXPECT_EQ(req.HeaderCount("x-amz-date"), 1);
  EXPECT_EQ(req.HeaderCount("x-amz-content-sha256"), 1);
  std::vector<std::string> signed_headers = SignedHeaders(req);
  EXPECT_THAT(signed_headers, Contains("host"));
  EXPECT_THAT(signed_headers, Contains("x-amz-date"));
  EXPECT_THAT(signed_headers, Contains("x-amz-content-sha256"));
  EXPECT_TRUE(std::is_sorted(signed_headers.begin(), signed_headers.end()));
  EXPECT_EQ(req.Header("authorization"),
            ExpectedSigV4Authorization(req, testing::kTestAccessKey, testing::kTestSecretKey,
                                       testing::kTestRegion))
      << req.request_line;
  // The signing time is libcurl's clock, which is this machine's.
  const std::string d = req.Header("x-amz-date");  // 20240101T000000Z
  ASSERT_EQ(d.size(), 16u) << d;
  const std::string rfc3339 =
      absl::StrCat(d.substr(0, 4), "-", d.substr(4, 2), "-", d.substr(6, 2), "T", d.substr(9, 2),
                   ":", d.substr(11, 2), ":", d.substr(13, 2), "Z");
  absl::Time signed_at;
  std::string err;
  ASSERT_TRUE(absl::ParseTime(absl::RFC3339_sec, rfc3339, &signed_at, &err)) << d << ": " << err;
  EXPECT_LT(absl::AbsDuration(absl::Now() - signed_at), absl::Minutes(5));
}

TEST(S3SigningTest, PutObjectSignsThePayloadHash) {
  LoopbackHttpServer server([](const RecordedRequest&) { return Ok(); });
  auto client = S3Client::Create(testing::LoopbackConfig(server));
  ASSERT_TRUE(client.ok()) << client.status();
  const std::string data = "{\"traceEvents\": []}\n";
  ASSERT_TRUE((*client)->PutObject("dir/a b+c~é.json", data).ok());

  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  const RecordedRequest& req = reqs[0];
  EXPECT_EQ(req.request_line, "PUT /traces/dir/a%20b%2Bc~%C3%A9.json HTTP/1.1");
  EXPECT_EQ(req.body, data);
  EXPECT_EQ(req.Header("x-amz-content-sha256"), Sha256Hex(data));
  EXPECT_EQ(req.Header("host"), absl::StrCat("127.0.0.1:", server.port()));
  EXPECT_EQ(req.Header("content-type"), "application/octet-stream");
  EXPECT_THAT(SignedHeaders(req), Contains("content-type"));
  ExpectSignedCorrectly(req);
  // A wrong secret gives a different signature: the comparison means something.
  EXPECT_NE(req.Header("authorization"), ExpectedSigV4Authorization(req, testing::kTestAccessKey,
                                                                    "other", testing::kTestRegion));
}

TEST(S3SigningTest, ListQueryIsCanonical) {
  LoopbackHttpServer server([](const RecordedRequest&) {
    CannedResponse r;
    r.body = "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>";
    return r;
  });
  auto client = S3Client::Create(testing::LoopbackConfig(server));
  ASSERT_TRUE(client.ok()) << client.status();
  ListObjectsRequest list;
  list.prefix = "gpuctl/2024 01/é";
  list.delimiter = "/";
  list.continuation_token = "1ue+Gc/xLP=";
  list.max_keys = 7;
  ASSERT_TRUE((*client)->ListObjects(list).ok());

  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "GET");
  EXPECT_EQ(reqs[0].path, "/traces");
  EXPECT_EQ(reqs[0].query,
            "continuation-token=1ue%2BGc%2FxLP%3D&delimiter=%2F&list-type=2&max-keys=7&"
            "prefix=gpuctl%2F2024%2001%2F%C3%A9");
  EXPECT_EQ(reqs[0].Header("x-amz-content-sha256"), kEmptySha256);
  ExpectSignedCorrectly(reqs[0]);
}

TEST(S3SigningTest, ListMultipartUploadsQueryIsCanonical) {
  LoopbackHttpServer server([](const RecordedRequest&) {
    CannedResponse r;
    r.body =
        "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>"
        "</ListMultipartUploadsResult>";
    return r;
  });
  auto client = S3Client::Create(testing::LoopbackConfig(server));
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->ListMultipartUploads("gpuctl/2024 01/").ok());
  ASSERT_TRUE((*client)->ListMultipartUploads("gpuctl/", "gpuctl/a+b é", "2~x/y=").ok());

  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].request_line, "GET /traces?prefix=gpuctl%2F2024%2001%2F&uploads= HTTP/1.1");
  EXPECT_EQ(reqs[1].path, "/traces");
  EXPECT_EQ(reqs[1].query,
            "key-marker=gpuctl%2Fa%2Bb%20%C3%A9&prefix=gpuctl%2F&upload-id-marker=2~x%2Fy%3D&"
            "uploads=");
  for (const RecordedRequest& req : reqs) {
    EXPECT_EQ(req.method, "GET");
    EXPECT_EQ(req.Header("x-amz-content-sha256"), kEmptySha256);
    ExpectSignedCorrectly(req);
  }
}

TEST(S3SigningTest, SessionTokenIsSentAndSigned) {
  LoopbackHttpServer server([](const RecordedRequest&) {
    CannedResponse r;
    r.status = 204;
    return r;
  });
  S3Config config = testing::LoopbackConfig(server);
  config.session_token = "FwoGZXIvYXdzEJr//////////wEaD+token";
  auto client = S3Client::Create(config);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->DeleteObject("k").ok());

  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].request_line, "DELETE /traces/k HTTP/1.1");
  EXPECT_EQ(reqs[0].Header("x-amz-security-token"), config.session_token);
  EXPECT_THAT(SignedHeaders(reqs[0]), Contains("x-amz-security-token"));
  ExpectSignedCorrectly(reqs[0]);
}

TEST(S3SigningTest, VirtualHostedStyleNamesTheBucketInTheHost) {
  LoopbackHttpServer server([](const RecordedRequest& req) {
    CannedResponse r;
    r.body = "0123456789";
    r.headers.emplace_back("ETag", "\"e\"");
    return r;
  });
  S3Config config = testing::LoopbackConfig(server);
  config.endpoint = absl::StrCat("http://s3.gpuctl.test:", server.port());
  config.path_style = false;
  S3ClientDeps deps;
  deps.resolve = {absl::StrCat("traces.s3.gpuctl.test:", server.port(), ":127.0.0.1")};
  auto client = S3Client::Create(config, deps);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->ObjectUrl("a/b"),
            absl::StrCat("http://traces.s3.gpuctl.test:", server.port(), "/a/b"));
  std::string got;
  ASSERT_TRUE((*client)
                  ->GetObject("a/b",
                              [&](absl::string_view chunk) {
                                got.append(chunk.data(), chunk.size());
                                return absl::OkStatus();
                              })
                  .ok());
  EXPECT_EQ(got, "0123456789");

  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].request_line, "GET /a/b HTTP/1.1");
  EXPECT_EQ(reqs[0].Header("host"), absl::StrCat("traces.s3.gpuctl.test:", server.port()));
  ExpectSignedCorrectly(reqs[0]);
}

TEST(S3SigningTest, RangeHeaderIsSigned) {
  LoopbackHttpServer server([](const RecordedRequest&) {
    CannedResponse r;
    r.status = 206;
    r.body = "345";
    return r;
  });
  auto client = S3Client::Create(testing::LoopbackConfig(server));
  ASSERT_TRUE(client.ok()) << client.status();
  std::string got;
  ASSERT_TRUE((*client)
                  ->GetObject(
                      "k",
                      [&](absl::string_view chunk) {
                        got.append(chunk.data(), chunk.size());
                        return absl::OkStatus();
                      },
                      ByteRange{3, 3})
                  .ok());
  EXPECT_EQ(got, "345");
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].Header("range"), "bytes=3-5");
  EXPECT_THAT(SignedHeaders(reqs[0]), Contains("range"));
  ExpectSignedCorrectly(reqs[0]);
}

}  // namespace
}  // namespace gpuctl::s3
