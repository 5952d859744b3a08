// Sweeping this host's orphaned multipart uploads against a loopback bucket.

#include "daemon/s3/orphaned_uploads.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "daemon/s3/testing/loopback_http_server.h"
#include "daemon/s3/testing/s3_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::s3 {
namespace {

using testing::CannedResponse;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::LoopbackHttpServer;
using testing::RecordedRequest;

constexpr char kTrace[] = "018bcfe5-6800-7000-8000-000000000001";  // 2023-11-14
constexpr char kDay[] = "gp/2023/11/14/";

std::string Key(absl::string_view file) { return absl::StrCat(kDay, kTrace, "/", file); }

TEST(IsHostTraceFileKeyTest, MatchesOnlyThisHostsDataFiles) {
  EXPECT_TRUE(IsHostTraceFileKey("gp", "node", Key("node-rank0-pid17.json.gz")));
  EXPECT_TRUE(IsHostTraceFileKey("gp", "node", Key("node-rank-1-pid17.json.gz")));
  // Another host whose name extends this one's.
  EXPECT_FALSE(IsHostTraceFileKey("gp", "node", Key("node-1-rank0-pid17.json.gz")));
  EXPECT_FALSE(IsHostTraceFileKey("gp", "node-1", Key("node-rank0-pid17.json.gz")));
  // Manifests, this host's included, are never data files: the legacy
  // layout's one and the per-host one of today's.
  EXPECT_FALSE(IsHostTraceFileKey("gp", "node", Key("manifest.json")));
  EXPECT_FALSE(IsHostTraceFileKey("gp", "node", Key("_gpuctl/node.json")));
  EXPECT_FALSE(IsHostTraceFileKey("gp", "node", Key("_gpuctl/node-rank0-pid17.json.gz")));
  EXPECT_FALSE(IsHostTraceFileKey("gp", "node", Key("node-rank0-pid17.json")));
  EXPECT_FALSE(IsHostTraceFileKey("gp", "node", Key("node-rank0-pidx.json.gz")));
  // Outside the layout or the prefix.
  EXPECT_FALSE(IsHostTraceFileKey("gp", "node", "gp/node-rank0-pid17.json.gz"));
  EXPECT_FALSE(IsHostTraceFileKey("other", "node", Key("node-rank0-pid17.json.gz")));
  // The host is cleaned as trace file names clean it.
  EXPECT_TRUE(IsHostTraceFileKey("gp", "a_b", Key("a-b-rank2-pid3.json.gz")));
  EXPECT_TRUE(IsHostTraceFileKey("", "node",
                                 absl::StrCat("2023/11/14/", kTrace, "/node-rank0-pid1.json.gz")));
}

struct Upload {
  std::string key;
  std::string id;
  std::string initiated;
};

// A bucket holding uploads, listed two per page; records what is aborted.
class UploadsBucket {
 public:
  explicit UploadsBucket(std::vector<Upload> uploads) : uploads_(std::move(uploads)) {}

  CannedResponse Handle(const RecordedRequest& req) {
    absl::MutexLock lock(&mu_);
    if (req.method == "GET" && absl::StrContains(req.query, "uploads=")) {
      queries_.push_back(req.query);
      if (list_status_ != 0) return testing::S3ErrorResponse(list_status_, "AccessDenied", "no");
      size_t start = 0;
      if (absl::StrContains(req.query, "key-marker=")) start = 2 * (queries_.size() - 1);
      return Page(start);
    }
    if (req.method == "DELETE") {
      if (abort_status_ != 0) return testing::S3ErrorResponse(abort_status_, "AccessDenied", "no");
      aborted_.push_back(absl::StrCat(req.path, "?", req.query));
      CannedResponse r;
      r.status = 204;
      return r;
    }
    return testing::S3ErrorResponse(400, "UnexpectedRequest", req.request_line);
  }

  std::vector<std::string> aborted() const {
    absl::MutexLock lock(&mu_);
    return aborted_;
  }
  std::vector<std::string> queries() const {
    absl::MutexLock lock(&mu_);
    return queries_;
  }
  void FailLists(int status) {
    absl::MutexLock lock(&mu_);
    list_status_ = status;
  }
  void FailAborts(int status) {
    absl::MutexLock lock(&mu_);
    abort_status_ = status;
  }

 private:
  CannedResponse Page(size_t start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    CannedResponse r;
    r.body = "<ListMultipartUploadsResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
    const size_t end = std::min(start + 2, uploads_.size());
    for (size_t i = start; i < end; ++i) {
      absl::StrAppend(&r.body, "<Upload><Key>", uploads_[i].key, "</Key><UploadId>", uploads_[i].id,
                      "</UploadId><Initiated>", uploads_[i].initiated, "</Initiated></Upload>");
    }
    if (end < uploads_.size()) {
      absl::StrAppend(&r.body, "<IsTruncated>true</IsTruncated><NextKeyMarker>",
                      uploads_[end - 1].key, "</NextKeyMarker><NextUploadIdMarker>",
                      uploads_[end - 1].id, "</NextUploadIdMarker>");
    } else {
      absl::StrAppend(&r.body, "<IsTruncated>false</IsTruncated>");
    }
    absl::StrAppend(&r.body, "</ListMultipartUploadsResult>");
    return r;
  }

  const std::vector<Upload> uploads_;
  mutable absl::Mutex mu_;
  std::vector<std::string> queries_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> aborted_ ABSL_GUARDED_BY(mu_);
  int list_status_ ABSL_GUARDED_BY(mu_) = 0;
  int abort_status_ ABSL_GUARDED_BY(mu_) = 0;
};

// Cutoff: 2023-11-14T12:00:00Z.
const absl::Time kCutoff = absl::FromUnixSeconds(1699963200);
constexpr char kOld[] = "2023-11-14T10:00:00.000Z";
constexpr char kRecent[] = "2023-11-14T12:30:00.000Z";

class OrphanedUploadsTest : public ::testing::Test {
 protected:
  OrphanedUploadsTest()
      : bucket_({{Key("node-rank0-pid1.json.gz"), "old-1", kOld},
                 {Key("node-rank1-pid2.json.gz"), "recent", kRecent},
                 {Key("node-1-rank0-pid3.json.gz"), "other-host", kOld},
                 {Key("manifest.json"), "no-host", kOld},
                 {Key("node-rank2-pid4.json.gz"), "old-2", kOld}}) {}

  std::shared_ptr<S3Client> Client() {
    S3Config config = testing::LoopbackConfig(server_);
    config.prefix = "gp";
    config.max_attempts = 1;
    auto client = S3Client::Create(config, waits_.Deps());
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::shared_ptr<S3Client>(*std::move(client)) : nullptr;
  }

  UploadsBucket bucket_;
  LoopbackHttpServer server_{[this](const RecordedRequest& req) { return bucket_.Handle(req); }};
  testing::RecordedWaits waits_;
};

TEST_F(OrphanedUploadsTest, AbortsOnlyThisHostsOldUploadsAcrossPages) {
  auto client = Client();
  OrphanedUploadsReport report =
      AbortOrphanedUploads(*client, "node", kCutoff, [] { return false; });
  EXPECT_TRUE(report.status.ok()) << report.status;
  EXPECT_EQ(report.listed, 5u);
  EXPECT_EQ(report.aborted, 2u);
  EXPECT_EQ(report.failed, 0u);
  const std::string path = absl::StrCat("/traces/", kDay, kTrace);
  EXPECT_THAT(bucket_.aborted(),
              ElementsAre(absl::StrCat(path, "/node-rank0-pid1.json.gz?uploadId=old-1"),
                          absl::StrCat(path, "/node-rank2-pid4.json.gz?uploadId=old-2")));
  // Pages follow each other's markers, all under the prefix.
  std::vector<std::string> queries = bucket_.queries();
  ASSERT_EQ(queries.size(), 3u);
  EXPECT_EQ(queries[0], "prefix=gp%2F&uploads=");
  EXPECT_EQ(queries[1], absl::StrCat("key-marker=gp%2F2023%2F11%2F14%2F", kTrace,
                                     "%2Fnode-rank1-pid2.json.gz&prefix=gp%2F&"
                                     "upload-id-marker=recent&uploads="));
  EXPECT_THAT(queries[2], HasSubstr("upload-id-marker=no-host&"));
}

TEST_F(OrphanedUploadsTest, AnotherHostAbortsNothingOfThisOne) {
  auto client = Client();
  OrphanedUploadsReport report =
      AbortOrphanedUploads(*client, "elsewhere", kCutoff, [] { return false; });
  EXPECT_TRUE(report.status.ok()) << report.status;
  EXPECT_EQ(report.listed, 5u);
  EXPECT_EQ(report.aborted, 0u);
  EXPECT_THAT(bucket_.aborted(), IsEmpty());
}

TEST_F(OrphanedUploadsTest, FailuresAreCountedNotFatal) {
  auto client = Client();
  bucket_.FailAborts(403);
  OrphanedUploadsReport report =
      AbortOrphanedUploads(*client, "node", kCutoff, [] { return false; });
  EXPECT_TRUE(report.status.ok()) << report.status;
  EXPECT_EQ(report.listed, 5u);
  EXPECT_EQ(report.aborted, 0u);
  EXPECT_EQ(report.failed, 2u);

  bucket_.FailLists(403);
  report = AbortOrphanedUploads(*client, "node", kCutoff, [] { return false; });
  EXPECT_TRUE(absl::IsPermissionDenied(report.status)) << report.status;
  EXPECT_THAT(report.status.message(), HasSubstr("ListMultipartUploads"));
  EXPECT_EQ(report.listed, 0u);
}

TEST_F(OrphanedUploadsTest, StoppingEndsTheSweepBeforeItsNextRequest) {
  auto client = Client();
  OrphanedUploadsReport report =
      AbortOrphanedUploads(*client, "node", kCutoff, [] { return true; });
  EXPECT_TRUE(absl::IsCancelled(report.status)) << report.status;
  EXPECT_THAT(bucket_.queries(), IsEmpty());
}

TEST_F(OrphanedUploadsTest, TheSweepRunsOnItsOwnThreadAndReports) {
  absl::Notification done;
  OrphanedUploadsReport got;
  auto sweep = OrphanedUploadSweep::Start(Client(), "node", kCutoff,
                                          [&](const OrphanedUploadsReport& report) {
                                            got = report;
                                            done.Notify();
                                          });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  sweep->Stop(absl::Seconds(5));
  EXPECT_EQ(got.aborted, 2u);
  EXPECT_EQ(bucket_.aborted().size(), 2u);
}

}  // namespace
}  // namespace gpuctl::s3
