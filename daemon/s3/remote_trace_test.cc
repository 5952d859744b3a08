// A trace the spool does not know, read from the bucket alone: its
// manifests listed under the trace's prefix, one chosen, served with its
// files by a store whose spool never held them.

#include "daemon/s3/remote_trace.h"

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/common/trace_id.h"
#include "daemon/s3/s3_trace_store.h"
#include "daemon/s3/testing/loopback_http_server.h"
#include "daemon/s3/testing/s3_test_util.h"
#include "daemon/s3/trace_object_key.h"
#include "daemon/store/local_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::s3 {
namespace {

namespace fs = std::filesystem;
using testing::CannedResponse;
using ::testing::ElementsAre;
using testing::LoopbackHttpServer;
using testing::RecordedRequest;

constexpr char kBucketPrefix[] = "gp";
constexpr char kH1File[] = "h1-rank0-pid5.json.gz";

std::string PercentDecoded(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    int byte = 0;
    if (s[i] == '%' && i + 2 < s.size() && absl::SimpleHexAtoi(s.substr(i + 1, 2), &byte)) {
      out.push_back(static_cast<char>(byte));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// Objects behind the loopback server: GET and HEAD of a key (ranged too),
// and ListObjectsV2 under a prefix, `page_size` keys a page.
class ListingBucket {
 public:
  explicit ListingBucket(int page_size) : page_size_(page_size) {}

  void Put(const std::string& key, const std::string& data) {
    absl::MutexLock lock(&mu_);
    objects_[key] = data;
  }

  CannedResponse Handle(const RecordedRequest& req) {
    absl::MutexLock lock(&mu_);
    const std::string bucket = absl::StrCat("/", testing::kTestBucket);
    if (req.method == "GET" && req.path == bucket) return List(req.query);
    if (!absl::StartsWith(req.path, bucket + "/")) return testing::S3ErrorResponse(400, "Bad", "");
    auto it = objects_.find(req.path.substr(bucket.size() + 1));
    if (it == objects_.end()) return testing::S3ErrorResponse(404, "NoSuchKey", "no such key");
    CannedResponse r;
    r.headers.emplace_back("ETag", "\"e\"");
    r.body = it->second;
    const std::string range = req.Header("range");
    if (!range.empty()) {  // "bytes=FROM-TO"
      std::vector<std::string> ends = absl::StrSplit(range.substr(6), '-');
      uint64_t from = 0, to = 0;
      EXPECT_TRUE(absl::SimpleAtoi(ends[0], &from) && absl::SimpleAtoi(ends[1], &to)) << range;
      r.status = 206;
      r.body = it->second.substr(from, to - from + 1);
    }
    return r;
  }

 private:
  CannedResponse List(const std::string& query) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    CannedResponse r;
    if (absl::StrContains(query, "uploads")) {  // the sweep of orphaned uploads
      r.body =
          "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>"
          "</ListMultipartUploadsResult>";
      return r;
    }
    std::string prefix, after;
    for (absl::string_view param : absl::StrSplit(query, '&')) {
      if (absl::ConsumePrefix(&param, "prefix=")) prefix = PercentDecoded(param);
      if (absl::ConsumePrefix(&param, "continuation-token=")) after = PercentDecoded(param);
    }
    r.body = "<ListBucketResult>";
    int listed = 0;
    for (auto it = objects_.upper_bound(after); it != objects_.end(); ++it) {
      if (!absl::StartsWith(it->first, prefix)) continue;
      if (listed == page_size_) {
        absl::StrAppend(&r.body, "<IsTruncated>true</IsTruncated><NextContinuationToken>",
                        std::prev(it)->first, "</NextContinuationToken>");
        break;
      }
      absl::StrAppend(&r.body, "<Contents><Key>", it->first, "</Key><Size>", it->second.size(),
                      "</Size></Contents>");
      ++listed;
    }
    if (!absl::StrContains(r.body, "<IsTruncated>")) {
      absl::StrAppend(&r.body, "<IsTruncated>false</IsTruncated>");
    }
    absl::StrAppend(&r.body, "</ListBucketResult>");
    return r;
  }

  const int page_size_;
  absl::Mutex mu_;
  std::map<std::string, std::string> objects_ ABSL_GUARDED_BY(mu_);
};

class RemoteTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpuctl-remote-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    tmp_ = tmpl;
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(tmp_);
  }

  std::unique_ptr<S3Client> Client() {
    S3Config config = testing::LoopbackConfig(server_);
    config.prefix = kBucketPrefix;
    auto client = S3Client::Create(config, waits_.Deps());
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }
  // The store of host `hostname`, on a spool of its own that never held
  // the trace.
  void OpenStore(const std::string& hostname) {
    daemon::LocalStoreOptions spool_options;
    spool_options.host = hostname;
    auto spool = daemon::LocalTraceStore::Create(tmp_ + "/spool-" + hostname, spool_options);
    ASSERT_TRUE(spool.ok()) << spool.status();
    S3StoreOptions options;
    options.hostname = hostname;
    store_ = S3TraceStore::Create(*std::move(spool), Client(), options);
  }

  // Host `host`'s manifest of the trace, put at `file` under the trace's prefix.
  std::string PutManifest(const std::string& host, const std::string& file,
                          const std::string& trace_id = "") {
    v1::TraceManifest m;
    m.set_trace_id(trace_id.empty() ? id_ : trace_id);
    m.set_host(host);
    v1::ProcessResult* result = m.add_results();
    result->set_status(v1::CAPTURE_STATUS_OK);
    result->set_file(absl::StrCat(host, "-rank0-pid5.json.gz"));
    m.mutable_storage()->set_state(v1::STORAGE_STATE_UPLOADED);
    absl::StatusOr<std::string> json = daemon::EncodeManifest(m);
    EXPECT_TRUE(json.ok()) << json.status();
    bucket_.Put(Key(file), *json);
    return *json;
  }
  std::string Key(const std::string& file) {
    absl::StatusOr<std::string> key = TraceObjectKey(kBucketPrefix, id_, file);
    EXPECT_TRUE(key.ok()) << key.status();
    return key.ok() ? *key : "";
  }
  std::string ReadAll(const std::string& name) {
    auto reader = store_->Open(id_, name);
    EXPECT_TRUE(reader.ok()) << name << ": " << reader.status();
    if (!reader.ok()) return "";
    std::string all, chunk;
    do {
      EXPECT_TRUE((*reader)->Read(3, &chunk).ok());
      all += chunk;
    } while (!chunk.empty());
    return all;
  }

  ListingBucket bucket_{2};
  LoopbackHttpServer server_{[this](const RecordedRequest& req) { return bucket_.Handle(req); }};
  testing::RecordedWaits waits_;
  absl::BitGen gen_;
  std::string id_ = GenerateTraceId(absl::FromUnixMillis(1'700'000'000'000), gen_);
  std::string tmp_;
  std::unique_ptr<S3TraceStore> store_;
};

TEST_F(RemoteTraceTest, ListsEveryHostsManifestPageByPage) {
  for (const char* host : {"h3", "h1", "h2"})
    PutManifest(host, absl::StrCat("_gpuctl/", host, ".json"));
  bucket_.Put(Key(kH1File), "data");
  auto client = Client();
  absl::StatusOr<std::vector<std::string>> names = ListRemoteManifests(*client, id_);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, ElementsAre("_gpuctl/h1.json", "_gpuctl/h2.json", "_gpuctl/h3.json"));
  EXPECT_TRUE(absl::IsInvalidArgument(ListRemoteManifests(*client, "not-a-trace").status()));
}

TEST_F(RemoteTraceTest, AStoreServesATraceItsSpoolNeverHeldFromTheBucket) {
  const std::string manifest = PutManifest("h1", "_gpuctl/h1.json");
  bucket_.Put(Key(kH1File), "rank zero of h1");
  OpenStore("h9");
  absl::StatusOr<v1::TraceManifest> got = store_->GetManifest(id_);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->host(), "h1");
  EXPECT_EQ(got->results(0).file(), kH1File);
  // Served under its own host's name, not this store's.
  EXPECT_EQ(store_->ServedManifestName(*got), "_gpuctl/h1.json");
  EXPECT_EQ(ReadAll("_gpuctl/h1.json"), manifest);
  EXPECT_EQ(ReadAll(kH1File), "rank zero of h1");
  EXPECT_TRUE(absl::IsNotFound(store_->Open(id_, "h1-rank1-pid6.json.gz").status()));
}

TEST_F(RemoteTraceTest, ThisHostsOwnManifestIsChosenElseTheFirst) {
  PutManifest("h2", "_gpuctl/h2.json");
  PutManifest("h3", "_gpuctl/h3.json");
  PutManifest("h4", "_gpuctl/h4.json");
  OpenStore("h3");
  absl::StatusOr<v1::TraceManifest> own = store_->GetManifest(id_);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->host(), "h3");
  store_.reset();
  OpenStore("h9");
  absl::StatusOr<v1::TraceManifest> first = store_->GetManifest(id_);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->host(), "h2");
}

TEST_F(RemoteTraceTest, ALegacyManifestIsReadWhenNoHostHasOne) {
  const std::string manifest = PutManifest("h1", "manifest.json");
  OpenStore("h9");
  absl::StatusOr<v1::TraceManifest> got = store_->GetManifest(id_);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->host(), "h1");
  EXPECT_EQ(ReadAll(store_->ServedManifestName(*got)), manifest);
}

TEST_F(RemoteTraceTest, ATraceNeitherInTheSpoolNorInTheBucketIsNotFound) {
  OpenStore("h9");
  absl::StatusOr<v1::TraceManifest> got = store_->GetManifest(id_);
  EXPECT_TRUE(absl::IsNotFound(got.status())) << got.status();
  EXPECT_TRUE(absl::IsNotFound(store_->Open(id_, kH1File).status()));
}

TEST_F(RemoteTraceTest, AManifestOfAnotherTraceIsRefused) {
  PutManifest("h1", "_gpuctl/h1.json",
              GenerateTraceId(absl::FromUnixMillis(1'700'000'000'000), gen_));
  OpenStore("h9");
  absl::StatusOr<v1::TraceManifest> got = store_->GetManifest(id_);
  EXPECT_TRUE(absl::IsDataLoss(got.status())) << got.status();
  bucket_.Put(Key("_gpuctl/h1.json"), "{not json");
  got = store_->GetManifest(id_);
  EXPECT_TRUE(absl::IsDataLoss(got.status())) << got.status();
}

}  // namespace
}  // namespace gpuctl::s3
