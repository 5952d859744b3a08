// S3TraceStore against a loopback server acting as the bucket: uploads on
// completion, local data removed and read back from the bucket, failures
// left pending and retried, uploads resumed after a restart, retention.

#include "daemon/s3/s3_trace_store.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "daemon/common/trace_id.h"
#include "daemon/s3/testing/loopback_http_server.h"
#include "daemon/s3/testing/s3_test_util.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace gpuctl::s3 {
namespace {

namespace fs = std::filesystem;
using testing::CannedResponse;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Key;
using testing::LoopbackHttpServer;
using testing::RecordedRequest;

constexpr char kFile0[] = "h1-rank0-pid5.json.gz";
constexpr char kFile1[] = "h1-rank1-pid6.json.gz";
// Another host's process in the same (fan-out) trace.
constexpr char kHost2File[] = "h2-rank2-pid7.json.gz";
constexpr char kManifest1[] = "_gpuctl/h1.json";
constexpr char kManifest2[] = "_gpuctl/h2.json";

// An in-memory bucket behind the loopback server; answers 500 while failing.
class FakeBucket {
 public:
  CannedResponse Handle(const RecordedRequest& req) {
    absl::MutexLock lock(&mu_);
    if (status_override_ != 0) {
      return testing::S3ErrorResponse(
          status_override_, status_override_ == 403 ? "AccessDenied" : "InternalError", "injected");
    }
    const std::string prefix = absl::StrCat("/", testing::kTestBucket, "/");
    CannedResponse r;
    if (req.method == "GET" && req.path == prefix.substr(0, prefix.size() - 1) &&
        absl::StrContains(req.query, "uploads=")) {
      r.body = "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>";
      for (const auto& [key, initiated] : uploads_) {
        absl::StrAppend(&r.body, "<Upload><Key>", key, "</Key><UploadId>id-", key,
                        "</UploadId><Initiated>", initiated, "</Initiated></Upload>");
      }
      absl::StrAppend(&r.body, "</ListMultipartUploadsResult>");
      return r;
    }
    if (!absl::StartsWith(req.path, prefix)) return testing::S3ErrorResponse(400, "Bad", "path");
    const std::string key = req.path.substr(prefix.size());
    if (req.method == "DELETE" && absl::StartsWith(req.query, "uploadId=")) {
      uploads_.erase(key);
      aborted_.push_back(key);
      r.status = 204;
      return r;
    }
    if (req.method == "PUT") {
      objects_[key] = req.body;
      put_order_.push_back(key);
      r.headers.emplace_back("ETag", "\"e\"");
      return r;
    }
    auto it = objects_.find(key);
    if (it == objects_.end()) return testing::S3ErrorResponse(404, "NoSuchKey", "no such key");
    r.headers.emplace_back("ETag", "\"e\"");
    const std::string range = req.Header("range");
    if (req.method == "GET" && !range.empty()) {
      // "bytes=FROM-TO"
      std::vector<std::string> ends = absl::StrSplit(range.substr(6), '-');
      uint64_t from = 0, to = 0;
      EXPECT_TRUE(absl::SimpleAtoi(ends[0], &from) && absl::SimpleAtoi(ends[1], &to)) << range;
      ++ranged_gets_;
      r.status = 206;
      r.body = it->second.substr(from, to - from + 1);
      return r;
    }
    r.body = it->second;
    return r;
  }

  // An upload in progress of `key`, initiated at `initiated` (RFC 3339).
  void AddUpload(const std::string& key, const std::string& initiated) {
    absl::MutexLock lock(&mu_);
    uploads_[key] = initiated;
  }
  std::vector<std::string> aborted() const {
    absl::MutexLock lock(&mu_);
    return aborted_;
  }
  void FailWith(int http_status) {
    absl::MutexLock lock(&mu_);
    status_override_ = http_status;
  }
  std::map<std::string, std::string> objects() const {
    absl::MutexLock lock(&mu_);
    return objects_;
  }
  // Stores or removes an object behind the store's back.
  void SetObject(const std::string& key, const std::string& data) {
    absl::MutexLock lock(&mu_);
    objects_[key] = data;
  }
  void EraseObject(const std::string& key) {
    absl::MutexLock lock(&mu_);
    objects_.erase(key);
  }
  std::vector<std::string> put_order() const {
    absl::MutexLock lock(&mu_);
    return put_order_;
  }
  int ranged_gets() const {
    absl::MutexLock lock(&mu_);
    return ranged_gets_;
  }

 private:
  mutable absl::Mutex mu_;
  int status_override_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::string> objects_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> put_order_ ABSL_GUARDED_BY(mu_);
  int ranged_gets_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::string> uploads_ ABSL_GUARDED_BY(mu_);  // key -> initiated
  std::vector<std::string> aborted_ ABSL_GUARDED_BY(mu_);
};

// What the uploader reported after each attempt, awaited with a deadline.
class Attempts {
 public:
  void Record(absl::string_view trace_id, const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    outcomes_.emplace_back(std::string(trace_id), status);
  }
  void RecordJitterBound(absl::Duration bound) {
    absl::MutexLock lock(&mu_);
    jitter_bounds_.push_back(bound);
  }
  // True once `trace_id` has been uploaded.
  bool WaitForSuccess(const std::string& trace_id) {
    return Wait([&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      for (const auto& [id, st] : outcomes_) {
        if (id == trace_id && st.ok()) return true;
      }
      return false;
    });
  }
  bool WaitForCount(size_t n) {
    return Wait([&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return outcomes_.size() >= n; });
  }
  std::vector<absl::Duration> jitter_bounds() const {
    absl::MutexLock lock(&mu_);
    return jitter_bounds_;
  }

 private:
  template <typename Pred>
  bool Wait(Pred pred) {
    absl::MutexLock lock(&mu_);
    auto cond = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return pred(); };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), absl::Seconds(20));
  }

  mutable absl::Mutex mu_;
  std::vector<std::pair<std::string, absl::Status>> outcomes_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Duration> jitter_bounds_ ABSL_GUARDED_BY(mu_);
};

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  return s;
}

// A loopback port nothing listens on.
int ClosedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // The sockets API takes the generic sockaddr.
  auto* generic =
      reinterpret_cast<sockaddr*>(&addr);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
  EXPECT_EQ(::bind(fd, generic, sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, generic, &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

class S3TraceStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpuctl-s3store-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    tmp_ = tmpl;
    root_ = tmp_ + "/spool";
    options_.upload_wait = absl::Seconds(20);
    options_.upload_retry_initial = absl::Milliseconds(20);
    options_.upload_retry_max = absl::Milliseconds(80);
    options_.hostname = "h1";
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(tmp_);
  }

  // (Re)creates store_ on root_, talking to `endpoint` (the server's when empty).
  void Open(const std::string& endpoint = "", daemon::LocalStoreOptions spool_options = {}) {
    store_.reset();
    spool_options.remove_incomplete = true;
    // As the daemon opens it: the spool and the uploader name one host.
    spool_options.host = options_.hostname;
    auto spool = daemon::LocalTraceStore::Create(root_, spool_options);
    ASSERT_TRUE(spool.ok()) << spool.status();
    S3Config config = testing::LoopbackConfig(server_);
    if (!endpoint.empty()) config.endpoint = endpoint;
    config.prefix = "gp";
    auto client = S3Client::Create(config, waits_.Deps());
    ASSERT_TRUE(client.ok()) << client.status();
    store_ = S3TraceStore::Create(*std::move(spool), *std::move(client), options_, Deps());
  }

  // A second daemon's store on its own spool, uploading to the same bucket
  // and prefix as host `hostname`.
  std::unique_ptr<S3TraceStore> OpenOtherHost(const std::string& hostname) {
    daemon::LocalStoreOptions spool_options;
    spool_options.host = hostname;
    auto spool = daemon::LocalTraceStore::Create(tmp_ + "/spool-" + hostname, spool_options);
    EXPECT_TRUE(spool.ok()) << spool.status();
    S3Config config = testing::LoopbackConfig(server_);
    config.prefix = "gp";
    auto client = S3Client::Create(config, waits_.Deps());
    EXPECT_TRUE(client.ok()) << client.status();
    if (!spool.ok() || !client.ok()) return nullptr;
    S3StoreOptions options = options_;
    options.hostname = hostname;
    TraceUploaderDeps deps;
    deps.on_attempt = [this](absl::string_view id, const absl::Status& st) {
      attempts_.Record(id, st);
    };
    return S3TraceStore::Create(*std::move(spool), *std::move(client), options, deps);
  }

  TraceUploaderDeps Deps() {
    TraceUploaderDeps deps;
    deps.jitter = [this](absl::Duration bound) {
      attempts_.RecordJitterBound(bound);
      return absl::ZeroDuration();
    };
    deps.on_attempt = [this](absl::string_view id, const absl::Status& st) {
      attempts_.Record(id, st);
    };
    swept_ = std::make_shared<absl::Notification>();
    deps.on_orphan_sweep = [swept = swept_, this](const OrphanedUploadsReport& report) {
      sweep_report_ = report;
      swept->Notify();
    };
    return deps;
  }

  v1::TraceManifest Manifest(const std::string& id) {
    v1::TraceManifest m;
    m.set_trace_id(id);
    m.set_job_id("j");
    m.set_host("h1");
    for (const char* file : {kFile0, kFile1}) {
      auto* r = m.add_results();
      r->set_status(v1::CAPTURE_STATUS_OK);
      r->set_file(file);
    }
    return m;
  }

  // Writes a two-file trace through the store and completes it.
  std::string PutTrace(int64_t ms, const std::string& data0 = "rank zero",
                       const std::string& data1 = "rank one") {
    std::string id = GenerateTraceId(absl::FromUnixMillis(ms), gen_);
    EXPECT_TRUE(store_->PutFile(id, kFile0, data0).ok());
    EXPECT_TRUE(store_->PutFile(id, kFile1, data1).ok());
    absl::Status st = store_->PutManifest(Manifest(id));
    EXPECT_TRUE(st.ok()) << st;
    return id;
  }

  v1::TraceStorage Storage(const std::string& id) {
    auto manifest = store_->GetManifest(id);
    EXPECT_TRUE(manifest.ok()) << manifest.status();
    return manifest.ok() ? manifest->storage() : v1::TraceStorage();
  }

  std::string ReadAll(const std::string& id, absl::string_view name, size_t chunk_size) {
    auto reader = store_->Open(id, name);
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (!reader.ok()) return "";
    std::string all, chunk;
    while (true) {
      absl::Status st = (*reader)->Read(chunk_size, &chunk);
      EXPECT_TRUE(st.ok()) << st;
      if (!st.ok() || chunk.empty()) break;
      all += chunk;
    }
    EXPECT_EQ(all.size(), (*reader)->size());
    return all;
  }

  std::string LocalDir(const std::string& id) { return root_ + "/" + id; }
  // The spool's manifest file, in whichever layout the spool keeps it.
  bool LocalManifestExists(const std::string& id) {
    return fs::exists(LocalDir(id) + "/" + kManifest1) ||
           fs::exists(LocalDir(id) + "/manifest.json");
  }
  // "gp/2023/11/14/<id>/": where the trace's objects go.
  std::string KeyPrefix(const std::string& id) {
    return absl::StrCat("gp/", absl::FormatTime("%Y/%m/%d", *TraceIdTime(id), absl::UTCTimeZone()),
                        "/", id, "/");
  }

  static constexpr int64_t kMs = 1'700'000'000'000;
  FakeBucket bucket_;
  LoopbackHttpServer server_{[this](const RecordedRequest& req) { return bucket_.Handle(req); }};
  testing::RecordedWaits waits_;
  Attempts attempts_;
  S3StoreOptions options_;
  absl::BitGen gen_;
  std::string tmp_;
  std::string root_;
  std::unique_ptr<S3TraceStore> store_;
  std::shared_ptr<absl::Notification> swept_;
  OrphanedUploadsReport sweep_report_;  // written before swept_ is notified
};

TEST_F(S3TraceStoreTest, StartAbortsThisHostsOrphanedUploadsInTheBackground) {
  store_.reset();
  const std::string old = "2023-11-14T10:00:00Z";
  const std::string recent = absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone());
  const std::string id = GenerateTraceId(absl::FromUnixMillis(kMs), gen_);
  bucket_.AddUpload(KeyPrefix(id) + kFile0, old);                     // this host's orphan
  bucket_.AddUpload(KeyPrefix(id) + kFile1, recent);                  // maybe live
  bucket_.AddUpload(KeyPrefix(id) + "h2-rank0-pid9.json.gz", old);    // another host's
  bucket_.AddUpload(KeyPrefix(id) + "h1-1-rank0-pid9.json.gz", old);  // host "h1-1"
  options_.hostname = "h1";
  Open();
  ASSERT_TRUE(swept_->WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(sweep_report_.status.ok()) << sweep_report_.status;
  EXPECT_EQ(sweep_report_.listed, 4u);
  EXPECT_EQ(sweep_report_.aborted, 1u);
  EXPECT_THAT(bucket_.aborted(), ElementsAre(KeyPrefix(id) + kFile0));
  // The store serves meanwhile and after.
  std::string traced = PutTrace(kMs + 1);
  EXPECT_TRUE(attempts_.WaitForSuccess(traced));
}

TEST_F(S3TraceStoreTest, AFailingSweepLeavesTheStoreWorking) {
  store_.reset();
  bucket_.FailWith(403);
  Open();
  ASSERT_TRUE(swept_->WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(absl::IsPermissionDenied(sweep_report_.status)) << sweep_report_.status;
  bucket_.FailWith(0);
  std::string id = PutTrace(kMs);
  EXPECT_TRUE(attempts_.WaitForSuccess(id));
}

TEST_F(S3TraceStoreTest, CompletingATraceUploadsItAndKeepsOnlyTheManifestLocally) {
  Open();
  const std::string id = PutTrace(kMs);
  const std::string prefix = KeyPrefix(id);
  const std::string remote = absl::StrCat("s3://traces/", prefix);

  v1::TraceStorage storage = Storage(id);
  EXPECT_EQ(storage.state(), v1::STORAGE_STATE_UPLOADED);
  EXPECT_EQ(storage.remote_location(), remote);
  EXPECT_EQ(storage.remote_endpoint(), server_.endpoint());
  EXPECT_EQ(storage.local_location(), "");
  EXPECT_EQ(storage.upload_error(), "");
  EXPECT_EQ(storage.upload_attempts(), 1u);
  EXPECT_GT(storage.uploaded_at().seconds(), 0);
  EXPECT_EQ(store_->GetManifest(id)->location(), remote);
  EXPECT_EQ(store_->Location(id), remote);

  std::map<std::string, std::string> objects = bucket_.objects();
  EXPECT_EQ(objects[prefix + kFile0], "rank zero");
  EXPECT_EQ(objects[prefix + kFile1], "rank one");
  // The manifest goes last, at this host's own key, and says where the trace is.
  ASSERT_EQ(bucket_.put_order().size(), 3u);
  EXPECT_EQ(bucket_.put_order().back(), prefix + kManifest1);
  EXPECT_EQ(objects.count(prefix + "manifest.json"), 0u);
  v1::TraceManifest remote_manifest;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(objects[prefix + kManifest1], &remote_manifest)
          .ok());
  EXPECT_EQ(remote_manifest.storage().state(), v1::STORAGE_STATE_UPLOADED);
  EXPECT_EQ(remote_manifest.location(), remote);

  EXPECT_FALSE(fs::exists(LocalDir(id) + "/" + kFile0));
  EXPECT_FALSE(fs::exists(LocalDir(id) + "/" + kFile1));
  EXPECT_TRUE(LocalManifestExists(id));
  EXPECT_THAT(store_->spool().AwaitingUpload(), IsEmpty());
  auto listed = store_->List({});
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->traces_size(), 1);
  EXPECT_EQ(listed->traces(0).storage().state(), v1::STORAGE_STATE_UPLOADED);
  EXPECT_EQ(store_->Location(""), absl::StrCat("s3://traces/gp (spooled in ", root_, ")"));
}

TEST_F(S3TraceStoreTest, OpenStreamsFromTheBucketOnceTheLocalFilesAreGone) {
  Open();
  const std::string big = Pattern(9 << 20);  // more than one ranged read
  const std::string id = PutTrace(kMs, big, "small");
  ASSERT_EQ(Storage(id).state(), v1::STORAGE_STATE_UPLOADED);
  ASSERT_FALSE(fs::exists(LocalDir(id) + "/" + kFile0));

  EXPECT_EQ(ReadAll(id, kFile0, 1 << 20), big);
  EXPECT_EQ(bucket_.ranged_gets(), 2);
  EXPECT_EQ(ReadAll(id, kFile1, 3), "small");
  // The manifest is served locally.
  EXPECT_THAT(ReadAll(id, "manifest.json", 4096), HasSubstr("STORAGE_STATE_UPLOADED"));
  EXPECT_EQ(bucket_.ranged_gets(), 3);
  EXPECT_EQ(store_->Open(id, "missing.json.gz").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(S3TraceStoreTest, TwoHostsOfOneTraceKeepAManifestEachAndEveryFile) {
  Open();
  std::unique_ptr<S3TraceStore> other = OpenOtherHost("h2");
  ASSERT_NE(other, nullptr);
  const std::string id = GenerateTraceId(absl::FromUnixMillis(kMs), gen_);
  const std::string prefix = KeyPrefix(id);
  // A fan-out trace: one id, each daemon its own processes.
  ASSERT_TRUE(store_->PutFile(id, kFile0, "rank zero").ok());
  ASSERT_TRUE(store_->PutFile(id, kFile1, "rank one").ok());
  ASSERT_TRUE(other->PutFile(id, kHost2File, "rank two").ok());
  v1::TraceManifest second;
  second.set_trace_id(id);
  second.set_job_id("j");
  second.set_host("h2");
  auto* result = second.add_results();
  result->set_status(v1::CAPTURE_STATUS_OK);
  result->set_file(kHost2File);
  ASSERT_TRUE(store_->PutManifest(Manifest(id)).ok());
  ASSERT_TRUE(other->PutManifest(second).ok());
  ASSERT_EQ(Storage(id).state(), v1::STORAGE_STATE_UPLOADED);
  ASSERT_EQ(other->GetManifest(id)->storage().state(), v1::STORAGE_STATE_UPLOADED);

  std::map<std::string, std::string> objects = bucket_.objects();
  EXPECT_THAT(objects,
              ElementsAre(Key(prefix + kManifest1), Key(prefix + kManifest2), Key(prefix + kFile0),
                          Key(prefix + kFile1), Key(prefix + kHost2File)));
  EXPECT_EQ(objects[prefix + kFile0], "rank zero");
  EXPECT_EQ(objects[prefix + kFile1], "rank one");
  EXPECT_EQ(objects[prefix + kHost2File], "rank two");
  // Each manifest is its own host's, listing its own processes.
  for (const auto& [manifest_key, host, files] :
       {std::tuple(kManifest1, "h1", std::vector<std::string>{kFile0, kFile1}),
        std::tuple(kManifest2, "h2", std::vector<std::string>{kHost2File})}) {
    v1::TraceManifest remote;
    ASSERT_TRUE(
        google::protobuf::util::JsonStringToMessage(objects[prefix + manifest_key], &remote).ok())
        << manifest_key;
    EXPECT_EQ(remote.trace_id(), id);
    EXPECT_EQ(remote.host(), host);
    EXPECT_EQ(remote.storage().state(), v1::STORAGE_STATE_UPLOADED);
    std::vector<std::string> listed;
    for (const v1::ProcessResult& r : remote.results()) listed.push_back(r.file());
    EXPECT_EQ(listed, files) << manifest_key;
  }
  // Per host, the manifest goes up after every file it lists.
  const std::vector<std::string> order = bucket_.put_order();
  auto at = [&](const std::string& key) {
    return std::find(order.begin(), order.end(), key) - order.begin();
  };
  EXPECT_GT(at(prefix + kManifest1), at(prefix + kFile0));
  EXPECT_GT(at(prefix + kManifest1), at(prefix + kFile1));
  EXPECT_GT(at(prefix + kManifest2), at(prefix + kHost2File));
  EXPECT_EQ(order.size(), 5u);

  // Both read their files back from the bucket, and either host's manifest.
  EXPECT_EQ(ReadAll(id, kFile1, 4096), "rank one");
  auto reader = other->Open(id, kHost2File);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->size(), std::string("rank two").size());
  EXPECT_THAT(ReadAll(id, kManifest2, 4096), HasSubstr("\"h2\""));
}

TEST_F(S3TraceStoreTest, OpenReadsAManifestOfEitherLayoutFromTheBucket) {
  Open();
  const std::string id = PutTrace(kMs);
  ASSERT_EQ(Storage(id).state(), v1::STORAGE_STATE_UPLOADED);
  const std::string prefix = KeyPrefix(id);
  // The spool no longer has the manifest file (its index still knows the
  // trace complete): the bucket serves it, by either name.
  fs::remove(LocalDir(id) + "/" + kManifest1);
  fs::remove(LocalDir(id) + "/manifest.json");
  ASSERT_FALSE(LocalManifestExists(id));
  const std::string uploaded = bucket_.objects()[prefix + kManifest1];
  ASSERT_THAT(uploaded, HasSubstr("STORAGE_STATE_UPLOADED"));
  EXPECT_EQ(ReadAll(id, kManifest1, 4096), uploaded);
  EXPECT_EQ(ReadAll(id, "manifest.json", 4096), uploaded);

  // A bucket written by the legacy layout: one manifest.json per trace.
  bucket_.EraseObject(prefix + kManifest1);
  bucket_.SetObject(prefix + "manifest.json", "{\"traceId\": \"legacy\"}");
  EXPECT_EQ(ReadAll(id, kManifest1, 4096), "{\"traceId\": \"legacy\"}");
  EXPECT_EQ(ReadAll(id, "manifest.json", 4096), "{\"traceId\": \"legacy\"}");
  // Another host's manifest is its own key only, never the legacy one.
  EXPECT_EQ(store_->Open(id, kManifest2).status().code(), absl::StatusCode::kNotFound);
  // Names outside the layout are refused before the bucket is asked.
  EXPECT_EQ(store_->Open(id, "_gpuctl/a/b.json").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(S3TraceStoreTest, AFailingBucketLeavesThePendingTraceLocalUntilARetrySucceeds) {
  bucket_.FailWith(500);
  Open();
  const std::string id = PutTrace(kMs);

  v1::TraceStorage storage = Storage(id);
  EXPECT_EQ(storage.state(), v1::STORAGE_STATE_UPLOAD_PENDING);
  EXPECT_EQ(storage.local_location(), LocalDir(id));
  EXPECT_EQ(storage.remote_location(), absl::StrCat("s3://traces/", KeyPrefix(id)));
  EXPECT_THAT(storage.upload_error(), HasSubstr("HTTP 500"));
  EXPECT_THAT(storage.upload_error(), HasSubstr(server_.endpoint()));
  EXPECT_GE(storage.upload_attempts(), 1u);
  EXPECT_EQ(store_->GetManifest(id)->location(), LocalDir(id));
  EXPECT_EQ(store_->Location(id), LocalDir(id));
  EXPECT_TRUE(fs::exists(LocalDir(id) + "/" + kFile0));
  EXPECT_THAT(store_->spool().AwaitingUpload(), ElementsAre(id));
  ASSERT_TRUE(attempts_.WaitForCount(2));  // retried in the background

  bucket_.FailWith(0);
  ASSERT_TRUE(attempts_.WaitForSuccess(id));
  storage = Storage(id);
  EXPECT_EQ(storage.state(), v1::STORAGE_STATE_UPLOADED);
  EXPECT_EQ(storage.upload_error(), "");
  EXPECT_GE(storage.upload_attempts(), 3u);
  EXPECT_FALSE(fs::exists(LocalDir(id) + "/" + kFile0));
  EXPECT_THAT(store_->spool().AwaitingUpload(), IsEmpty());
  EXPECT_EQ(store_->pending_uploads(), 0u);
}

TEST_F(S3TraceStoreTest, RetriesBackOffExponentiallyUpToTheMaximum) {
  bucket_.FailWith(500);
  Open();
  PutTrace(kMs);
  // The fifth attempt starts after the fourth's delay was chosen.
  ASSERT_TRUE(attempts_.WaitForCount(5));
  // Half of each delay is jittered: 20ms, 40ms, 80ms, then capped at 80ms.
  std::vector<absl::Duration> bounds = attempts_.jitter_bounds();
  ASSERT_GE(bounds.size(), 4u);
  EXPECT_THAT(std::vector<absl::Duration>(bounds.begin(), bounds.begin() + 4),
              ElementsAre(absl::Milliseconds(10), absl::Milliseconds(20), absl::Milliseconds(40),
                          absl::Milliseconds(40)));
}

TEST_F(S3TraceStoreTest, AuthenticationErrorsAreRetriedAtTheMaximumInterval) {
  bucket_.FailWith(403);
  Open();
  const std::string id = PutTrace(kMs);
  EXPECT_THAT(Storage(id).upload_error(), HasSubstr("AccessDenied"));
  EXPECT_EQ(Storage(id).state(), v1::STORAGE_STATE_UPLOAD_PENDING);
  // The delay after the first attempt was chosen before PutManifest returned.
  ASSERT_FALSE(attempts_.jitter_bounds().empty());
  EXPECT_EQ(attempts_.jitter_bounds()[0], absl::Milliseconds(40));

  bucket_.FailWith(0);  // credentials fixed: the next retry succeeds
  EXPECT_TRUE(attempts_.WaitForSuccess(id));
}

TEST_F(S3TraceStoreTest, AnUnreachableEndpointIsPendingWithAnErrorNamingIt) {
  const std::string endpoint = absl::StrCat("http://127.0.0.1:", ClosedPort());
  Open(endpoint);
  const std::string id = PutTrace(kMs);
  v1::TraceStorage storage = Storage(id);
  EXPECT_EQ(storage.state(), v1::STORAGE_STATE_UPLOAD_PENDING);
  EXPECT_EQ(storage.remote_endpoint(), endpoint);
  EXPECT_THAT(storage.upload_error(), HasSubstr(endpoint));
  EXPECT_TRUE(fs::exists(LocalDir(id) + "/" + kFile1));
}

TEST_F(S3TraceStoreTest, RetentionNeverEvictsATracePendingUpload) {
  daemon::LocalStoreOptions spool;
  spool.retention.max_count = 1;
  Open(absl::StrCat("http://127.0.0.1:", ClosedPort()), spool);
  const std::string first = PutTrace(kMs);
  const std::string second = PutTrace(kMs + 1);
  EXPECT_EQ(store_->EnforceRetention(), 0u);
  EXPECT_TRUE(fs::exists(LocalDir(first) + "/" + kFile0));
  EXPECT_TRUE(fs::exists(LocalDir(second) + "/" + kFile0));
  EXPECT_THAT(store_->spool().AwaitingUpload(), ElementsAre(first, second));
}

TEST_F(S3TraceStoreTest, TracesAwaitingUploadResumeAfterARestart) {
  bucket_.FailWith(500);
  Open();
  const std::string id = PutTrace(kMs);
  ASSERT_EQ(Storage(id).state(), v1::STORAGE_STATE_UPLOAD_PENDING);
  const uint32_t attempts_before = Storage(id).upload_attempts();
  store_.reset();

  bucket_.FailWith(0);
  Open();
  ASSERT_TRUE(attempts_.WaitForSuccess(id));
  v1::TraceStorage storage = Storage(id);
  EXPECT_EQ(storage.state(), v1::STORAGE_STATE_UPLOADED);
  EXPECT_GT(storage.upload_attempts(), attempts_before);
  EXPECT_EQ(bucket_.objects()[KeyPrefix(id) + kFile0], "rank zero");
  EXPECT_FALSE(fs::exists(LocalDir(id) + "/" + kFile0));
}

TEST_F(S3TraceStoreTest, KeepLocalKeepsTheDataFilesAndReadsThemLocally) {
  options_.keep_local = true;
  Open();
  const std::string id = PutTrace(kMs);
  v1::TraceStorage storage = Storage(id);
  EXPECT_EQ(storage.state(), v1::STORAGE_STATE_UPLOADED);
  EXPECT_EQ(storage.local_location(), LocalDir(id));
  EXPECT_TRUE(fs::exists(LocalDir(id) + "/" + kFile0));
  EXPECT_EQ(ReadAll(id, kFile0, 4), "rank zero");
  EXPECT_EQ(bucket_.ranged_gets(), 0);
  EXPECT_EQ(bucket_.objects().size(), 3u);
}

TEST_F(S3TraceStoreTest, WithoutUploadWaitPutManifestReturnsPending) {
  bucket_.FailWith(500);
  options_.upload_wait = absl::ZeroDuration();
  options_.upload_retry_initial = absl::Seconds(60);
  options_.shutdown_wait = absl::ZeroDuration();
  Open();
  const std::string id = PutTrace(kMs);
  v1::TraceStorage storage = Storage(id);
  EXPECT_EQ(storage.state(), v1::STORAGE_STATE_UPLOAD_PENDING);
  ASSERT_TRUE(attempts_.WaitForCount(1));
  // Without shutdown_wait, Shutdown does not retry at all.
  const absl::Time start = absl::Now();
  store_->Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_THAT(store_->spool().AwaitingUpload(), ElementsAre(id));
}

}  // namespace
}  // namespace gpuctl::s3
