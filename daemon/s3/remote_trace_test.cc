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
#include "daemon/s3/remote_listing.h"
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
    std::string prefix, after, delimiter;
    for (absl::string_view param : absl::StrSplit(query, '&')) {
      if (absl::ConsumePrefix(&param, "prefix=")) prefix = PercentDecoded(param);
      if (absl::ConsumePrefix(&param, "continuation-token=")) after = PercentDecoded(param);
      if (absl::ConsumePrefix(&param, "delimiter=")) delimiter = PercentDecoded(param);
    }
    r.body = "<ListBucketResult>";
    int listed = 0;
    std::string last;  // the last key or common prefix listed: the next page's token
    for (auto it = objects_.upper_bound(after); it != objects_.end(); ++it) {
      if (!absl::StartsWith(it->first, prefix)) continue;
      // With a delimiter, the keys sharing the part up to it are one common
      // prefix; '~' sorts after every key character, so the token passes them.
      const size_t cut =
          delimiter.empty() ? std::string::npos : it->first.find(delimiter, prefix.size());
      const std::string common =
          cut == std::string::npos ? "" : it->first.substr(0, cut + delimiter.size());
      if (!common.empty() && absl::StartsWith(last, common)) continue;
      if (listed == page_size_) {
        absl::StrAppend(&r.body, "<IsTruncated>true</IsTruncated><NextContinuationToken>", last,
                        "</NextContinuationToken>");
        break;
      }
      if (common.empty()) {
        absl::StrAppend(&r.body, "<Contents><Key>", it->first, "</Key><Size>", it->second.size(),
                        "</Size></Contents>");
        last = it->first;
      } else {
        absl::StrAppend(&r.body, "<CommonPrefixes><Prefix>", common, "</Prefix></CommonPrefixes>");
        last = common + "~";
      }
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

TEST_F(RemoteTraceTest, EveryHostsPartIsReadFromTheBucketWhateverTheSpoolHolds) {
  const std::string h1 = PutManifest("h1", "_gpuctl/h1.json");
  const std::string h2 = PutManifest("h2", "_gpuctl/h2.json");
  bucket_.Put(Key(kH1File), "rank zero of h1");
  bucket_.Put(Key("h2-rank0-pid5.json.gz"), "rank zero of h2");
  // Any daemon of the bucket, h1's own included, reads every host's
  // manifest and file there.
  OpenStore("h1");
  auto manifests = store_->GetBucketManifests(id_);
  ASSERT_TRUE(manifests.ok()) << manifests.status();
  ASSERT_EQ(manifests->size(), 2u);
  EXPECT_EQ((*manifests)[0].first, "_gpuctl/h1.json");
  EXPECT_EQ((*manifests)[0].second.results(0).file(), kH1File);
  EXPECT_EQ((*manifests)[1].first, "_gpuctl/h2.json");
  EXPECT_EQ((*manifests)[1].second.host(), "h2");
  auto read_in_bucket = [&](const std::string& name) {
    auto reader = store_->OpenInBucket(id_, name);
    EXPECT_TRUE(reader.ok()) << name << ": " << reader.status();
    std::string all, chunk;
    if (!reader.ok()) return all;
    do {
      EXPECT_TRUE((*reader)->Read(5, &chunk).ok());
      all += chunk;
    } while (!chunk.empty());
    return all;
  };
  EXPECT_EQ(read_in_bucket("_gpuctl/h2.json"), h2);
  EXPECT_EQ(read_in_bucket("_gpuctl/h1.json"), h1);
  EXPECT_EQ(read_in_bucket("h2-rank0-pid5.json.gz"), "rank zero of h2");
  EXPECT_TRUE(absl::IsNotFound(store_->OpenInBucket(id_, "h3-rank0-pid5.json.gz").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->GetBucketManifests("not-a-trace").status()));
  // A trace of the legacy layout: its one manifest.json.
  id_ = GenerateTraceId(absl::FromUnixMillis(1'700'000'000'001), gen_);
  PutManifest("h0", "manifest.json");
  manifests = store_->GetBucketManifests(id_);
  ASSERT_TRUE(manifests.ok()) << manifests.status();
  ASSERT_EQ(manifests->size(), 1u);
  EXPECT_EQ((*manifests)[0].first, "manifest.json");
  EXPECT_EQ((*manifests)[0].second.host(), "h0");
  // None at all.
  id_ = GenerateTraceId(absl::FromUnixMillis(1'700'000'000'002), gen_);
  EXPECT_TRUE(absl::IsNotFound(store_->GetBucketManifests(id_).status()));
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

// Traces of several hosts and days in the bucket, listed as ListTraces
// with `bucket` set lists them.
class BucketListingTest : public RemoteTraceTest {
 protected:
  // A trace taken `ago` before now_ by `hosts`, of `job`, under `kind`.
  std::string PutTrace(absl::Duration ago, const std::string& job,
                       const std::vector<std::string>& hosts = {"h1"},
                       v1::TriggerKind kind = v1::TRIGGER_KIND_UNSPECIFIED) {
    std::string id = GenerateTraceId(now_ - ago, gen_);
    for (const std::string& host : hosts) {
      v1::TraceManifest m;
      m.set_trace_id(id);
      m.set_host(host);
      m.set_job_id(job);
      m.mutable_trigger()->set_kind(kind);
      absl::StatusOr<std::string> json = daemon::EncodeManifest(m);
      EXPECT_TRUE(json.ok()) << json.status();
      absl::StatusOr<std::string> key =
          TraceObjectKey(kBucketPrefix, id, absl::StrCat("_gpuctl/", host, ".json"));
      EXPECT_TRUE(key.ok()) << key.status();
      bucket_.Put(*key, *json);
      // A data file beside it, which the day's listing passes over.
      bucket_.Put(*TraceObjectKey(kBucketPrefix, id, host + "-rank0-pid5.json.gz"), "gz");
    }
    return id;
  }
  absl::StatusOr<v1::ListTracesResponse> List(v1::ListTracesRequest request) {
    request.set_bucket(true);
    std::unique_ptr<S3Client> client = Client();
    return ListBucketTraces(*client, request, "_gpuctl/h2.json", now_);
  }
  static std::vector<std::string> Ids(const v1::ListTracesResponse& response) {
    std::vector<std::string> ids;
    for (const v1::TraceManifest& t : response.traces()) ids.push_back(t.trace_id());
    return ids;
  }

  // Midday UTC, so "a day ago" is yesterday.
  absl::Time now_ = absl::FromCivil(absl::CivilSecond(2026, 12, 4, 12, 0, 0), absl::UTCTimeZone());
};

TEST_F(BucketListingTest, NewestFirstAcrossDaysPageByPage) {
  const std::string today_a = PutTrace(absl::Hours(1), "42", {"h1", "h2"});
  const std::string today_b = PutTrace(absl::Minutes(5), "42");
  const std::string yesterday = PutTrace(absl::Hours(30), "42");
  v1::ListTracesRequest request;
  request.set_page_size(2);
  absl::StatusOr<v1::ListTracesResponse> first = List(request);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(Ids(*first), ElementsAre(today_b, today_a));
  // The trace both hosts took is described by this host's manifest.
  EXPECT_EQ(first->traces(1).host(), "h2");
  ASSERT_EQ(first->next_page_token(), today_a);
  request.set_page_token(first->next_page_token());
  absl::StatusOr<v1::ListTracesResponse> second = List(request);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_THAT(Ids(*second), ElementsAre(yesterday));
  EXPECT_TRUE(second->next_page_token().empty());
}

TEST_F(BucketListingTest, FiltersByJobAndTriggerAndStopsAtTheDaysAskedFor) {
  const std::string scheduled = PutTrace(absl::Hours(2), "42", {"h1"}, v1::TRIGGER_KIND_SCHEDULED);
  const std::string on_demand = PutTrace(absl::Hours(3), "42");
  PutTrace(absl::Hours(4), "7");
  const std::string old = PutTrace(absl::Hours(24 * 9), "42");
  v1::ListTracesRequest request;
  request.set_job_id("42");
  absl::StatusOr<v1::ListTracesResponse> week = List(request);
  ASSERT_TRUE(week.ok()) << week.status();
  EXPECT_THAT(Ids(*week), ElementsAre(scheduled, on_demand));
  request.set_trigger(v1::TRIGGER_KIND_ON_DEMAND);
  absl::StatusOr<v1::ListTracesResponse> asked = List(request);
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_THAT(Ids(*asked), ElementsAre(on_demand));
  request.clear_trigger();
  request.set_bucket_days(10);
  absl::StatusOr<v1::ListTracesResponse> longer = List(request);
  ASSERT_TRUE(longer.ok()) << longer.status();
  EXPECT_THAT(Ids(*longer), ElementsAre(scheduled, on_demand, old));
}

TEST_F(BucketListingTest, AnUnreadableManifestIsSkippedAndBadRequestsRefused) {
  const std::string good = PutTrace(absl::Hours(1), "42");
  const std::string bad = PutTrace(absl::Hours(2), "42");
  bucket_.Put(*TraceObjectKey(kBucketPrefix, bad, "_gpuctl/h1.json"), "{not json");
  absl::StatusOr<v1::ListTracesResponse> listed = List({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(Ids(*listed), ElementsAre(good));
  v1::ListTracesRequest request;
  request.set_bucket_days(367);
  EXPECT_TRUE(absl::IsInvalidArgument(List(request).status()));
  request.set_bucket_days(1);
  request.set_page_token("not-an-id");
  EXPECT_TRUE(absl::IsInvalidArgument(List(request).status()));
}

TEST_F(BucketListingTest, TheStoreListsTheBucketOnlyWhenAsked) {
  const std::string id = PutTrace(absl::Minutes(1), "42");
  OpenStore("h9");
  v1::ListTracesRequest request;
  absl::StatusOr<v1::ListTracesResponse> own = store_->List(request);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->traces_size(), 0);
  request.set_bucket(true);
  request.set_bucket_days(kMaxBucketDays);
  absl::StatusOr<v1::ListTracesResponse> bucket = store_->List(request);
  ASSERT_TRUE(bucket.ok()) << bucket.status();
  ASSERT_THAT(Ids(*bucket), ElementsAre(id));
  EXPECT_THAT(bucket->traces(0).location(), ::testing::StartsWith("s3://"));
  // A store without a bucket says so.
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->spool().List(request).status()));
}

}  // namespace
}  // namespace gpuctl::s3
