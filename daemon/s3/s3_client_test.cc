// S3Client operations and error reporting against a loopback listener.

#include "daemon/s3/s3_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/s3/testing/loopback_http_server.h"
#include "daemon/s3/testing/s3_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::s3 {
namespace {

using testing::CannedResponse;
using ::testing::HasSubstr;
using testing::LoopbackHttpServer;
using testing::RecordedRequest;
using testing::S3ErrorResponse;

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  return s;
}

class S3ClientTest : public ::testing::Test {
 protected:
  std::unique_ptr<S3Client> Client(const LoopbackHttpServer& server) {
    auto client = S3Client::Create(testing::LoopbackConfig(server), waits_.Deps());
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }
  // Collects a download.
  absl::Status Get(S3Client& client, absl::string_view key, std::string* out,
                   std::optional<ByteRange> range = std::nullopt) {
    return client.GetObject(
        key,
        [out](absl::string_view chunk) {
          out->append(chunk.data(), chunk.size());
          return absl::OkStatus();
        },
        range);
  }

  testing::RecordedWaits waits_;
};

TEST_F(S3ClientTest, GetStreamsTheObjectInChunks) {
  const std::string object = Pattern(3 << 20);
  LoopbackHttpServer server([&](const RecordedRequest&) {
    CannedResponse r;
    r.body = object;
    return r;
  });
  auto client = Client(server);
  std::string got;
  int chunks = 0;
  absl::Status st = client->GetObject("big", [&](absl::string_view chunk) {
    got.append(chunk.data(), chunk.size());
    ++chunks;
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(got, object);
  EXPECT_GT(chunks, 1);
  EXPECT_EQ(server.requests()[0].request_line, "GET /traces/big HTTP/1.1");
}

TEST_F(S3ClientTest, HeadReportsSizeAndMetadata) {
  LoopbackHttpServer server([](const RecordedRequest&) {
    CannedResponse r;
    r.body = std::string(1234, 'x');  // only its length is sent, as Content-Length
    r.headers = {{"ETag", "\"9b2cf535f27731c974343645a3985328\""},
                 {"Content-Type", "application/gzip"},
                 {"Last-Modified", "Tue, 02 Jan 2024 03:04:05 GMT"}};
    return r;
  });
  auto client = Client(server);
  auto info = client->HeadObject("a/manifest.json");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->size, 1234u);
  EXPECT_EQ(info->etag, "\"9b2cf535f27731c974343645a3985328\"");
  EXPECT_EQ(info->content_type, "application/gzip");
  EXPECT_EQ(info->last_modified, absl::FromUnixSeconds(1704164645));
  EXPECT_EQ(server.requests()[0].method, "HEAD");
}

TEST_F(S3ClientTest, ListReturnsTheParsedPage) {
  LoopbackHttpServer server([](const RecordedRequest&) {
    CannedResponse r;
    r.body =
        "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<IsTruncated>true</IsTruncated><NextContinuationToken>t2</NextContinuationToken>"
        "<Contents><Key>p/1</Key><Size>5</Size><ETag>\"e\"</ETag></Contents>"
        "</ListBucketResult>";
    return r;
  });
  auto client = Client(server);
  ListObjectsRequest req;
  req.prefix = "p/";
  auto page = client->ListObjects(req);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, "p/1");
  EXPECT_EQ(page->next_continuation_token, "t2");

  req.max_keys = 1001;
  EXPECT_TRUE(absl::IsInvalidArgument(client->ListObjects(req).status()));
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(S3ClientTest, ListMultipartUploadsReturnsThePageAndRetries) {
  int calls = 0;
  LoopbackHttpServer server([&](const RecordedRequest&) {
    if (++calls == 1) return testing::S3ErrorResponse(503, "SlowDown", "later");
    CannedResponse r;
    r.body =
        "<ListMultipartUploadsResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<IsTruncated>true</IsTruncated><NextKeyMarker>p/1</NextKeyMarker>"
        "<NextUploadIdMarker>u1</NextUploadIdMarker>"
        "<Upload><Key>p/1</Key><UploadId>u1</UploadId>"
        "<Initiated>2024-01-02T03:04:05.000Z</Initiated></Upload>"
        "</ListMultipartUploadsResult>";
    return r;
  });
  auto client = Client(server);
  auto page = client->ListMultipartUploads("p/");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->uploads.size(), 1u);
  EXPECT_EQ(page->uploads[0].key, "p/1");
  EXPECT_EQ(page->uploads[0].upload_id, "u1");
  EXPECT_EQ(page->uploads[0].initiated, absl::FromUnixSeconds(1704164645));
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_key_marker, "p/1");
  EXPECT_EQ(page->next_upload_id_marker, "u1");
  EXPECT_EQ(server.requests().size(), 2u);
  EXPECT_EQ(waits_.waits().size(), 1u);

  EXPECT_TRUE(absl::IsInvalidArgument(
      client->ListMultipartUploads("p/", "k", std::string(2000, 'u')).status()));
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST_F(S3ClientTest, ListMultipartUploadsNamesAMalformedAnswer) {
  LoopbackHttpServer server([](const RecordedRequest&) {
    CannedResponse r;
    r.body = "<ListMultipartUploadsResult><IsTruncated>maybe</IsTruncated>";
    return r;
  });
  auto client = Client(server);
  absl::Status st = client->ListMultipartUploads("p/").status();
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("ListMultipartUploads"));
  EXPECT_THAT(st.message(), HasSubstr("prefix \"p/\""));
  EXPECT_THAT(st.message(), HasSubstr("malformed"));
}

TEST_F(S3ClientTest, AbortMultipartUploadSendsItsIdAndToleratesAGoneUpload) {
  int calls = 0;
  LoopbackHttpServer server([&](const RecordedRequest&) {
    if (++calls == 2) return testing::S3ErrorResponse(404, "NoSuchUpload", "gone");
    CannedResponse r;
    r.status = 204;
    return r;
  });
  auto client = Client(server);
  ASSERT_TRUE(client->AbortMultipartUpload("p/a b", "2~u/1+x").ok());
  EXPECT_TRUE(client->AbortMultipartUpload("p/a b", "2~u/1+x").ok());
  EXPECT_EQ(server.requests()[0].request_line,
            "DELETE /traces/p/a%20b?uploadId=2~u%2F1%2Bx HTTP/1.1");
  EXPECT_TRUE(absl::IsInvalidArgument(client->AbortMultipartUpload("p/a", "")));
  EXPECT_EQ(server.requests().size(), 2u);
}

struct ErrorCase {
  int http_status;
  const char* s3_code;
  absl::StatusCode expected;
};

TEST_F(S3ClientTest, MapsS3ErrorsAndNamesTheRequest) {
  const ErrorCase cases[] = {
      {404, "NoSuchKey", absl::StatusCode::kNotFound},
      {404, "NoSuchBucket", absl::StatusCode::kNotFound},
      {403, "SignatureDoesNotMatch", absl::StatusCode::kPermissionDenied},
      {403, "AccessDenied", absl::StatusCode::kPermissionDenied},
      {403, "InvalidAccessKeyId", absl::StatusCode::kUnauthenticated},
      {400, "ExpiredToken", absl::StatusCode::kUnauthenticated},
      {400, "InvalidArgument", absl::StatusCode::kInvalidArgument},
      {400, "XAmzContentSHA256Mismatch", absl::StatusCode::kDataLoss},
      {301, "PermanentRedirect", absl::StatusCode::kFailedPrecondition},
      {403, "RequestTimeTooSkewed", absl::StatusCode::kFailedPrecondition},
      {416, "InvalidRange", absl::StatusCode::kOutOfRange},
      {409, "SomethingNew", absl::StatusCode::kAborted},
  };
  for (const ErrorCase& c : cases) {
    LoopbackHttpServer server([&](const RecordedRequest&) {
      return S3ErrorResponse(c.http_status, c.s3_code, "it went wrong");
    });
    auto client = Client(server);
    std::string got;
    absl::Status st = Get(*client, "dir/obj.json", &got);
    EXPECT_EQ(st.code(), c.expected) << c.s3_code << ": " << st;
    EXPECT_THAT(st.message(), HasSubstr("S3 GetObject of key \"dir/obj.json\" in bucket "
                                        "\"traces\" at " +
                                        server.endpoint()));
    EXPECT_THAT(st.message(),
                HasSubstr(absl::StrCat("HTTP ", c.http_status, " ", c.s3_code, ": it went wrong")));
    EXPECT_THAT(st.message(), HasSubstr("request id tx-test-1"));
    EXPECT_EQ(server.requests().size(), 1u) << c.s3_code << " must not be retried";
    EXPECT_TRUE(got.empty()) << "an error body must not reach the sink";
  }
}

TEST_F(S3ClientTest, HeadErrorsHaveNoBodyButKeepTheStatus) {
  LoopbackHttpServer server([](const RecordedRequest&) {
    CannedResponse r;
    r.status = 404;
    return r;
  });
  auto client = Client(server);
  absl::Status st = client->HeadObject("gone").status();
  EXPECT_TRUE(absl::IsNotFound(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("S3 HeadObject of key \"gone\""));
  EXPECT_THAT(st.message(), HasSubstr("HTTP 404"));
}

TEST_F(S3ClientTest, UnreachableEndpointIsUnavailable) {
  // A port that was just free: nothing listens there.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  ASSERT_EQ(::bind(fd, sa, sizeof(addr)), 0);
  ASSERT_EQ(::getsockname(fd, sa, &len), 0);
  ::close(fd);

  S3Config config;
  config.endpoint = absl::StrCat("http://127.0.0.1:", ntohs(addr.sin_port));
  config.region = "us-east-1";
  config.bucket = "traces";
  config.path_style = true;
  config.access_key_id = "AKID";
  config.secret_access_key = "secret";
  config.max_attempts = 2;
  auto client = S3Client::Create(config, waits_.Deps());
  ASSERT_TRUE(client.ok()) << client.status();
  absl::Status st = (*client)->DeleteObject("k");
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_THAT(st.message(),
              HasSubstr("S3 DeleteObject of key \"k\" in bucket \"traces\" at " + config.endpoint));
  EXPECT_THAT(st.message(), HasSubstr("(after 2 attempts)"));
  EXPECT_EQ(waits_.waits().size(), 1u);
}

TEST_F(S3ClientTest, SinkErrorStopsTheDownloadAsIs) {
  LoopbackHttpServer server([](const RecordedRequest&) {
    CannedResponse r;
    r.body = Pattern(4 << 20);
    return r;
  });
  auto client = Client(server);
  int calls = 0;
  absl::Status st = client->GetObject("k", [&](absl::string_view) {
    ++calls;
    return absl::ResourceExhaustedError("disk full");
  });
  EXPECT_EQ(st, absl::ResourceExhaustedError("disk full"));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(S3ClientTest, BrokenDownloadResumesPinnedToTheETag) {
  const std::string object = Pattern(300000);
  LoopbackHttpServer server([&](const RecordedRequest& req) {
    CannedResponse r;
    r.headers.emplace_back("ETag", "\"v1\"");
    if (req.Header("range").empty()) {
      r.body = object;
      r.action = CannedResponse::Action::kTruncateBody;
      r.truncate_at = 100000;
      return r;
    }
    size_t from = std::stoul(req.Header("range").substr(6));
    r.status = 206;
    r.body = object.substr(from);
    return r;
  });
  auto client = Client(server);
  std::string got;
  absl::Status st = Get(*client, "k", &got);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(got, object);
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[1].Header("range"), "bytes=100000-");
  EXPECT_EQ(reqs[1].Header("if-match"), "\"v1\"");
  EXPECT_EQ(waits_.waits().size(), 1u);
}

TEST_F(S3ClientTest, ResumedRangeKeepsItsEnd) {
  const std::string object = Pattern(300000);
  LoopbackHttpServer server([&](const RecordedRequest& req) {
    CannedResponse r;
    r.status = 206;
    r.headers.emplace_back("ETag", "\"v1\"");
    std::string range = req.Header("range");  // bytes=a-b
    size_t dash = range.find('-');
    size_t from = std::stoul(range.substr(6, dash - 6));
    size_t to = std::stoul(range.substr(dash + 1));
    r.body = object.substr(from, to - from + 1);
    if (req.Header("if-match").empty()) {
      r.action = CannedResponse::Action::kTruncateBody;
      r.truncate_at = 1000;
    }
    return r;
  });
  auto client = Client(server);
  std::string got;
  ASSERT_TRUE(Get(*client, "k", &got, ByteRange{5000, 200000}).ok());
  EXPECT_EQ(got, object.substr(5000, 200000));
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].Header("range"), "bytes=5000-204999");
  EXPECT_EQ(reqs[1].Header("range"), "bytes=6000-204999");
}

TEST_F(S3ClientTest, ObjectReplacedDuringResumeIsAborted) {
  LoopbackHttpServer server([](const RecordedRequest& req) {
    if (!req.Header("if-match").empty()) {
      return S3ErrorResponse(412, "PreconditionFailed", "At least one of the preconditions failed");
    }
    CannedResponse r;
    r.headers.emplace_back("ETag", "\"v1\"");
    r.body = Pattern(200000);
    r.action = CannedResponse::Action::kTruncateBody;
    r.truncate_at = 5000;
    return r;
  });
  auto client = Client(server);
  std::string got;
  absl::Status st = Get(*client, "k", &got);
  EXPECT_TRUE(absl::IsAborted(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("replaced"));
  EXPECT_EQ(got.size(), 5000u);
}

TEST_F(S3ClientTest, ServerIgnoringTheRangeIsAnError) {
  LoopbackHttpServer server([](const RecordedRequest&) {
    CannedResponse r;
    r.body = "whole object";
    return r;
  });
  auto client = Client(server);
  std::string got;
  absl::Status st = Get(*client, "k", &got, ByteRange{4, 2});
  EXPECT_TRUE(absl::IsUnimplemented(st)) << st;
  EXPECT_TRUE(got.empty());
}

TEST_F(S3ClientTest, RejectsBadArgumentsWithoutSending) {
  LoopbackHttpServer server([](const RecordedRequest&) { return CannedResponse{}; });
  auto client = Client(server);
  std::string got;
  EXPECT_TRUE(absl::IsInvalidArgument(client->PutObject("", "x")));
  EXPECT_TRUE(absl::IsInvalidArgument(client->DeleteObject("a\rb")));
  EXPECT_TRUE(absl::IsInvalidArgument(Get(*client, "k", &got, ByteRange{0, 0})));
  PutOptions bad_type;
  bad_type.content_type = "text/plain\r\nX-Evil: 1";
  EXPECT_TRUE(absl::IsInvalidArgument(client->PutObject("k", "x", bad_type)));
  EXPECT_TRUE(server.requests().empty());
}

TEST_F(S3ClientTest, CreateChecksConfigAndCredentials) {
  S3Config config;
  config.endpoint = "http://127.0.0.1:1";
  config.region = "us-east-1";
  config.bucket = "traces";
  config.path_style = true;
  auto none = S3Client::Create(config, waits_.Deps());
  EXPECT_TRUE(absl::IsFailedPrecondition(none.status())) << none.status();

  S3ClientDeps deps = waits_.Deps();
  deps.env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "AWS_ACCESS_KEY_ID") return "AKIDENV";
    if (name == "AWS_SECRET_ACCESS_KEY") return "envsecret";
    return std::nullopt;
  };
  auto from_env = S3Client::Create(config, deps);
  ASSERT_TRUE(from_env.ok()) << from_env.status();
  EXPECT_EQ((*from_env)->credentials_source(), "environment");

  config.bucket = "No";
  EXPECT_TRUE(absl::IsInvalidArgument(S3Client::Create(config, deps).status()));
}

// Many calls at once, each on its own handle; run under TSan in CI.
TEST_F(S3ClientTest, ConcurrentCallsAreIndependent) {
  std::map<std::string, std::string> objects;  // touched only by the server thread
  LoopbackHttpServer server([&](const RecordedRequest& req) {
    CannedResponse r;
    if (req.method == "PUT") {
      objects[req.path] = req.body;
    } else if (auto it = objects.find(req.path); it != objects.end()) {
      r.body = it->second;
    } else {
      return S3ErrorResponse(404, "NoSuchKey", "no");
    }
    return r;
  });
  auto client = Client(server);
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        std::string key = absl::StrCat("t", t, "/obj", i);
        std::string data = absl::StrCat(Pattern(1000 + t * 10 + i), key);
        std::string got;
        if (!client->PutObject(key, data).ok() || !Get(*client, key, &got).ok() || got != data) {
          ++failures[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  EXPECT_EQ(server.requests().size(), 80u);
}

}  // namespace
}  // namespace gpuctl::s3
