// Uploads from files: single PUT up to the threshold, multipart above it.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/s3/object_body.h"
#include "daemon/s3/s3_client.h"
#include "daemon/s3/testing/loopback_http_server.h"
#include "daemon/s3/testing/s3_test_util.h"
#include "daemon/s3/testing/sigv4_verifier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::s3 {
namespace {

namespace fs = std::filesystem;
using testing::CannedResponse;
using ::testing::HasSubstr;
using testing::LoopbackHttpServer;
using testing::RecordedRequest;
using testing::S3ErrorResponse;

constexpr char kUploadId[] = "2~up/1+x";
constexpr char kUploadIdQuery[] = "uploadId=2~up%2F1%2Bx";

// A multipart-capable fake: the test sets how individual steps fail.
struct FakeMultipartS3 {
  int fail_part = 0;              // answer this part number with 403 AccessDenied
  int complete_errors_in_ok = 0;  // first completes answer 200 + <Error>
  bool complete_fails = false;    // completes answer 400 InvalidPart
  bool first_part_fails = false;  // every part answers 400

  CannedResponse Handle(const RecordedRequest& req) {
    CannedResponse r;
    if (req.method == "POST" && req.query == "uploads=") {
      r.body = absl::StrCat(
          "<InitiateMultipartUploadResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
          "<Bucket>traces</Bucket><Key>k</Key><UploadId>",
          kUploadId, "</UploadId></InitiateMultipartUploadResult>");
      return r;
    }
    if (req.method == "PUT" && absl::StartsWith(req.query, "partNumber=")) {
      int part = std::stoi(req.query.substr(11));
      if (first_part_fails) return S3ErrorResponse(400, "EntityTooSmall", "no");
      if (part == fail_part) return S3ErrorResponse(403, "AccessDenied", "Access Denied");
      r.headers.emplace_back("ETag", absl::StrCat("\"etag-", part, "\""));
      return r;
    }
    if (req.method == "POST" && req.query == kUploadIdQuery) {
      if (complete_fails) return S3ErrorResponse(400, "InvalidPart", "part missing");
      if (complete_errors_in_ok > 0) {
        --complete_errors_in_ok;
        CannedResponse e = S3ErrorResponse(200, "InternalError", "try again");
        return e;
      }
      r.body =
          "<CompleteMultipartUploadResult><ETag>\"x-3\"</ETag></CompleteMultipartUploadResult>";
      return r;
    }
    if (req.method == "DELETE" && req.query == kUploadIdQuery) {
      r.status = 204;
      return r;
    }
    if (req.method == "PUT" && req.query.empty()) return r;
    return S3ErrorResponse(400, "UnexpectedRequest", req.request_line);
  }
};

std::string RandomBytes(size_t n) {
  std::mt19937_64 gen(7);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = gen();
    for (size_t j = 0; j < 8 && i + j < n; ++j) s[i + j] = static_cast<char>(v >> (8 * j));
  }
  return s;
}

class S3MultipartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpuctl-s3-mp-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string WriteFile(const std::string& data) {
    std::string path = dir_ + "/trace.json.gz";
    std::ofstream(path, std::ios::binary) << data;
    return path;
  }
  std::unique_ptr<S3Client> Client(const LoopbackHttpServer& server) {
    S3Config config = testing::LoopbackConfig(server);
    config.part_size = 5 * kMiB;
    config.multipart_threshold = 6 * kMiB;
    auto client = S3Client::Create(config, waits_.Deps());
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }
  static std::vector<std::string> Lines(const std::vector<RecordedRequest>& reqs) {
    std::vector<std::string> lines;
    for (const auto& r : reqs) lines.push_back(r.request_line);
    return lines;
  }

  std::string dir_;
  testing::RecordedWaits waits_;
  FakeMultipartS3 fake_;
};

TEST_F(S3MultipartTest, UploadsPartsInOrderAndCompletes) {
  const std::string data = RandomBytes(12 * kMiB);
  LoopbackHttpServer server([this](const RecordedRequest& r) { return fake_.Handle(r); });
  auto client = Client(server);
  PutOptions options;
  options.content_type = "application/gzip";
  absl::Status st = client->PutObjectFromFile("t/trace.json.gz", WriteFile(data), options);
  ASSERT_TRUE(st.ok()) << st;

  auto reqs = server.requests();
  const std::string path = "/traces/t/trace.json.gz";
  EXPECT_THAT(Lines(reqs), ::testing::ElementsAre(
                               "POST " + path + "?uploads= HTTP/1.1",
                               "PUT " + path + "?partNumber=1&" + kUploadIdQuery + " HTTP/1.1",
                               "PUT " + path + "?partNumber=2&" + kUploadIdQuery + " HTTP/1.1",
                               "PUT " + path + "?partNumber=3&" + kUploadIdQuery + " HTTP/1.1",
                               "POST " + path + "?" + kUploadIdQuery + " HTTP/1.1"));
  ASSERT_EQ(reqs.size(), 5u);
  EXPECT_EQ(reqs[0].Header("content-type"), "application/gzip");
  EXPECT_EQ(reqs[0].Header("x-amz-content-sha256"), kEmptySha256);
  const size_t sizes[] = {5 * kMiB, 5 * kMiB, 2 * kMiB};
  size_t offset = 0;
  for (int i = 0; i < 3; ++i) {
    const RecordedRequest& part = reqs[1 + i];
    ASSERT_EQ(part.body.size(), sizes[i]) << "part " << i + 1;
    EXPECT_TRUE(part.body == data.substr(offset, sizes[i])) << "part " << i + 1;
    EXPECT_EQ(part.Header("x-amz-content-sha256"), Sha256Hex(part.body));
    offset += sizes[i];
  }
  const RecordedRequest& complete = reqs[4];
  EXPECT_EQ(complete.Header("content-type"), "application/xml");
  EXPECT_EQ(complete.Header("x-amz-content-sha256"), Sha256Hex(complete.body));
  EXPECT_THAT(complete.body,
              HasSubstr("<Part><PartNumber>1</PartNumber><ETag>\"etag-1\"</ETag></Part>"
                        "<Part><PartNumber>2</PartNumber><ETag>\"etag-2\"</ETag></Part>"
                        "<Part><PartNumber>3</PartNumber><ETag>\"etag-3\"</ETag></Part>"));
  for (const RecordedRequest& r : reqs) {
    EXPECT_EQ(r.Header("authorization"),
              testing::ExpectedSigV4Authorization(r, testing::kTestAccessKey,
                                                  testing::kTestSecretKey, testing::kTestRegion))
        << r.request_line;
  }
}

TEST_F(S3MultipartTest, UpToTheThresholdIsOnePut) {
  const std::string data = RandomBytes(6 * kMiB);
  LoopbackHttpServer server([this](const RecordedRequest& r) { return fake_.Handle(r); });
  auto client = Client(server);
  ASSERT_TRUE(client->PutObjectFromFile("k", WriteFile(data)).ok());
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].request_line, "PUT /traces/k HTTP/1.1");
  EXPECT_TRUE(reqs[0].body == data);
  EXPECT_EQ(reqs[0].Header("x-amz-content-sha256"), Sha256Hex(data));
}

TEST_F(S3MultipartTest, FailedPartAbortsTheUpload) {
  fake_.fail_part = 2;
  LoopbackHttpServer server([this](const RecordedRequest& r) { return fake_.Handle(r); });
  auto client = Client(server);
  absl::Status st = client->PutObjectFromFile("k", WriteFile(RandomBytes(11 * kMiB)));
  EXPECT_TRUE(absl::IsPermissionDenied(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("S3 UploadPart of key \"k\" part 2"));
  EXPECT_THAT(st.message(), HasSubstr("HTTP 403 AccessDenied"));
  auto lines = Lines(server.requests());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[3], absl::StrCat("DELETE /traces/k?", kUploadIdQuery, " HTTP/1.1"));
}

TEST_F(S3MultipartTest, FailedCompleteAbortsTheUpload) {
  fake_.complete_fails = true;
  LoopbackHttpServer server([this](const RecordedRequest& r) { return fake_.Handle(r); });
  auto client = Client(server);
  absl::Status st = client->PutObject("k", RandomBytes(7 * kMiB));
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("S3 CompleteMultipartUpload of key \"k\""));
  auto lines = Lines(server.requests());
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[4], absl::StrCat("DELETE /traces/k?", kUploadIdQuery, " HTTP/1.1"));
}

TEST_F(S3MultipartTest, ErrorInsideAnOkCompleteIsRetried) {
  fake_.complete_errors_in_ok = 1;
  LoopbackHttpServer server([this](const RecordedRequest& r) { return fake_.Handle(r); });
  auto client = Client(server);
  absl::Status st = client->PutObject("k", RandomBytes(7 * kMiB));
  ASSERT_TRUE(st.ok()) << st;
  auto lines = Lines(server.requests());
  ASSERT_EQ(lines.size(), 5u);  // create, 2 parts, 2 completes
  EXPECT_EQ(lines[3], lines[4]);
  EXPECT_EQ(waits_.waits().size(), 1u);
}

// A body of any size, all zeros, without the memory.
class ZeroBody final : public ObjectBody {
 public:
  explicit ZeroBody(uint64_t size) : size_(size) {}
  uint64_t size() const override { return size_; }
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t len) const override {
    size_t n = offset >= size_ ? 0 : std::min<uint64_t>(len, size_ - offset);
    std::fill(buf, buf + n, '\0');
    return n;
  }
  std::string Describe() const override { return "zeros"; }

 private:
  uint64_t size_;
};

TEST_F(S3MultipartTest, PartsGrowToStayWithinTenThousand) {
  fake_.first_part_fails = true;  // stop after the first part
  LoopbackHttpServer server([this](const RecordedRequest& r) { return fake_.Handle(r); });
  auto client = Client(server);
  const uint64_t size = 10001 * (5 * kMiB);
  absl::Status st = client->PutObjectFromBody("k", ZeroBody(size));
  EXPECT_FALSE(st.ok());
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u);  // create, part 1, abort
  EXPECT_EQ(reqs[1].body.size(), (size + kMaxParts - 1) / kMaxParts);
  EXPECT_GT(reqs[1].body.size(), 5 * kMiB);
}

TEST_F(S3MultipartTest, FileShrinkingUnderneathIsDataLoss) {
  LoopbackHttpServer server([this](const RecordedRequest& r) { return fake_.Handle(r); });
  auto client = Client(server);
  std::string path = WriteFile(RandomBytes(100000));
  auto body = OpenFileBody(path);
  ASSERT_TRUE(body.ok()) << body.status();
  ASSERT_EQ(::truncate(path.c_str(), 5000), 0);
  absl::Status st = client->PutObjectFromBody("k", **body);
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("shrank"));
  EXPECT_TRUE(server.requests().empty());
}

TEST_F(S3MultipartTest, MissingFileNamesThePath) {
  LoopbackHttpServer server([this](const RecordedRequest& r) { return fake_.Handle(r); });
  auto client = Client(server);
  absl::Status st = client->PutObjectFromFile("k", dir_ + "/nope");
  EXPECT_TRUE(absl::IsNotFound(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr(dir_ + "/nope"));
}

}  // namespace
}  // namespace gpuctl::s3
