// The uploader's retry timing against a fake clock: a retry comes due on the
// injected Clock and its wake-up is a timer on an injected TaskRunner, so
// the test moves time and nothing waits for real delays. So does the flush
// at shutdown: what is queued goes up at once, and the flush ends at
// shutdown_wait on that clock.

#include "daemon/s3/trace_uploader.h"

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "daemon/common/testing/fake_clock.h"
#include "daemon/common/testing/observed_task_runner.h"
#include "daemon/common/trace_id.h"
#include "daemon/core/proto_time.h"
#include "daemon/s3/s3_trace_store.h"
#include "daemon/s3/testing/loopback_http_server.h"
#include "daemon/s3/testing/s3_test_util.h"
#include "gtest/gtest.h"

namespace gpuctl::s3 {
namespace {

namespace fs = std::filesystem;
using testing::CannedResponse;
using testing::LoopbackHttpServer;
using testing::RecordedRequest;

constexpr char kFile[] = "h1-rank0-pid5.json.gz";
constexpr absl::Duration kWait = absl::Seconds(20);

// The outcome of every attempt, in order.
class UploadAttempts {
 public:
  void Record(const absl::Status& status) {
    std::lock_guard<std::mutex> lock(mu_);
    outcomes_.push_back(status);
    changed_.notify_all();
  }
  bool WaitForCount(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, absl::ToChronoNanoseconds(kWait),
                             [&] { return outcomes_.size() >= n; });
  }
  std::vector<absl::Status> outcomes() {
    std::lock_guard<std::mutex> lock(mu_);
    return outcomes_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<absl::Status> outcomes_;
};

// store->Shutdown() on a thread of its own: with the fake clock, the test
// decides when the flush's deadline passes.
class ShutdownThread {
 public:
  explicit ShutdownThread(S3TraceStore* store)
      : thread_([this, store] {
          report_ = store->Shutdown();
          done_.Notify();
        }) {}
  ~ShutdownThread() { thread_.join(); }
  bool WaitDone() { return done_.WaitForNotificationWithTimeout(kWait); }
  // Once WaitDone returned true.
  const FlushReport& report() const { return report_; }

 private:
  absl::Notification done_;
  FlushReport report_;
  std::thread thread_;
};

class TraceUploaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpuctl-uploader-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    tmp_ = tmpl;
    options_.upload_wait = kWait;
    options_.upload_retry_initial = absl::Seconds(1);
    options_.upload_retry_max = absl::Seconds(8);
    options_.hostname = "h1";
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(tmp_);
  }

  void Open() {
    auto spool = daemon::LocalTraceStore::Create(tmp_ + "/spool", {});
    ASSERT_TRUE(spool.ok()) << spool.status();
    auto client = S3Client::Create(testing::LoopbackConfig(server_), waits_.Deps());
    ASSERT_TRUE(client.ok()) << client.status();
    TraceUploaderDeps deps;
    deps.clock = &clock_;
    deps.timers = &runner_;
    deps.jitter = [](absl::Duration bound) { return bound; };  // the delay is the full base
    deps.on_attempt = [this](absl::string_view, const absl::Status& st) { attempts_.Record(st); };
    store_ = S3TraceStore::Create(*std::move(spool), *std::move(client), options_, deps);
  }

  CannedResponse Handle(const RecordedRequest& req) {
    const int failing = fail_with_.load();
    if (failing != 0) {
      return testing::S3ErrorResponse(failing, failing == 403 ? "AccessDenied" : "InternalError",
                                      "injected");
    }
    CannedResponse r;
    if (req.method == "GET") {
      r.body =
          "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>"
          "</ListMultipartUploadsResult>";
    }
    r.headers.emplace_back("ETag", "\"e\"");
    return r;
  }

  v1::TraceManifest Manifest() {
    v1::TraceManifest m;
    m.set_trace_id(id_);
    m.set_host("h1");
    m.add_results()->set_file(kFile);
    return m;
  }
  // Writes a one-file trace and completes it; the first attempt has ended
  // when this returns.
  void PutTrace() {
    ASSERT_TRUE(store_->PutFile(id_, kFile, "rank zero").ok());
    ASSERT_TRUE(store_->PutManifest(Manifest()).ok());
    ASSERT_TRUE(attempts_.WaitForCount(1));
  }
  // Waits for the uploader thread to ask for a wake-up `delay` from now,
  // and arms it: the retry is due then.
  void ExpectRetryIn(absl::Duration delay) {
    ASSERT_TRUE(runner_.RunUntilTimerArmedAt(clock_.Now() + delay)) << "no retry due in " << delay;
    ASSERT_EQ(runner_.fake().pending_timers(), 1u);
  }

  // Moves the clock to `deadline` once the flush has armed its wake-up
  // there: the flush ends.
  void PassFlushDeadline(absl::Time deadline) {
    ASSERT_TRUE(runner_.RunUntilTimerArmedAt(deadline)) << "the flush waits for no deadline";
    runner_.fake().AdvanceBy(deadline - clock_.Now());
  }
  v1::StorageState State() {
    auto manifest = store_->GetManifest(id_);
    EXPECT_TRUE(manifest.ok()) << manifest.status();
    return manifest.ok() ? manifest->storage().state() : v1::STORAGE_STATE_UNSPECIFIED;
  }

  gpuctl::testing::FakeClock clock_;
  gpuctl::testing::ObservedTaskRunner runner_{&clock_};
  std::atomic<int> fail_with_{0};
  LoopbackHttpServer server_{[this](const RecordedRequest& req) { return Handle(req); }};
  testing::RecordedWaits waits_;
  UploadAttempts attempts_;
  S3StoreOptions options_;
  absl::BitGen gen_;
  std::string id_ = GenerateTraceId(absl::FromUnixMillis(1'700'000'000'000), gen_);
  std::string tmp_;
  std::unique_ptr<S3TraceStore> store_;
};

TEST_F(TraceUploaderTest, EachRetryWaitsOutItsBackoffOnTheInjectedClock) {
  fail_with_ = 500;
  Open();
  PutTrace();
  const absl::Duration delays[] = {absl::Seconds(1), absl::Seconds(2), absl::Seconds(4),
                                   absl::Seconds(8), absl::Seconds(8)};
  for (size_t i = 0; i < std::size(delays); ++i) {
    ExpectRetryIn(delays[i]);
    runner_.fake().AdvanceBy(delays[i] - absl::Milliseconds(1));
    EXPECT_EQ(attempts_.outcomes().size(), i + 1) << "retried before its delay of " << delays[i];
    EXPECT_EQ(runner_.fake().pending_timers(), 1u);
    runner_.fake().AdvanceBy(absl::Milliseconds(1));
    ASSERT_TRUE(attempts_.WaitForCount(i + 2)) << "no retry after " << delays[i];
  }
  EXPECT_EQ(store_->pending_uploads(), 1u);
}

TEST_F(TraceUploaderTest, AnAuthenticationErrorWaitsTheLongestIntervalAtOnce) {
  fail_with_ = 403;
  Open();
  PutTrace();
  ExpectRetryIn(options_.upload_retry_max);
  runner_.fake().AdvanceBy(options_.upload_retry_max - absl::Milliseconds(1));
  EXPECT_EQ(attempts_.outcomes().size(), 1u);

  fail_with_ = 0;  // credentials fixed: the retry succeeds
  runner_.fake().AdvanceBy(absl::Milliseconds(1));
  ASSERT_TRUE(attempts_.WaitForCount(2));
  EXPECT_TRUE(attempts_.outcomes()[1].ok()) << attempts_.outcomes()[1];
  EXPECT_EQ(store_->pending_uploads(), 0u);
  auto manifest = store_->GetManifest(id_);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->storage().state(), v1::STORAGE_STATE_UPLOADED);
  EXPECT_EQ(manifest->storage().uploaded_at().seconds(),
            daemon::ToProtoTimestamp(clock_.Now()).seconds());
  EXPECT_EQ(runner_.fake().pending_timers(), 0u);
}

TEST_F(TraceUploaderTest, CompletingThePendingTraceAgainIsAttemptedWithoutWaiting) {
  fail_with_ = 500;
  Open();
  PutTrace();
  ExpectRetryIn(options_.upload_retry_initial);
  fail_with_ = 0;
  ASSERT_TRUE(store_->PutManifest(Manifest()).ok());
  ASSERT_TRUE(attempts_.WaitForCount(2));
  EXPECT_TRUE(attempts_.outcomes()[1].ok()) << attempts_.outcomes()[1];
  // The wake-up armed for the retry comes due to nothing.
  runner_.fake().AdvanceBy(options_.upload_retry_max);
  EXPECT_EQ(runner_.fake().pending_timers(), 0u);
  EXPECT_EQ(attempts_.outcomes().size(), 2u);
  EXPECT_EQ(store_->pending_uploads(), 0u);
}

TEST_F(TraceUploaderTest, ThePendingTraceAgesFromItsQueueingAndItsBytesCountOnceUploaded) {
  fail_with_ = 500;
  Open();
  EXPECT_EQ(store_->oldest_pending_upload_since(), absl::InfiniteFuture());
  const absl::Time queued = clock_.Now();
  PutTrace();
  ExpectRetryIn(options_.upload_retry_initial);
  EXPECT_EQ(store_->oldest_pending_upload_since(), queued);
  EXPECT_EQ(store_->uploaded_bytes(), 0u);
  fail_with_ = 0;
  runner_.fake().AdvanceBy(options_.upload_retry_initial);
  ASSERT_TRUE(attempts_.WaitForCount(2));
  ASSERT_TRUE(attempts_.outcomes()[1].ok()) << attempts_.outcomes()[1];
  EXPECT_EQ(store_->oldest_pending_upload_since(), absl::InfiniteFuture());
  // The data file, and this host's manifest as it went up.
  uint64_t sent = 0;
  for (const RecordedRequest& req : server_.requests()) {
    if (req.method == "PUT" && absl::EndsWith(req.path, "/_gpuctl/h1.json")) {
      sent = req.body.size();
    }
  }
  ASSERT_GT(sent, 0u);
  EXPECT_EQ(store_->uploaded_bytes(), std::string("rank zero").size() + sent);
}

TEST_F(TraceUploaderTest, ShutdownUploadsAPendingTraceAtOnceInsteadOfWaitingOutItsBackoff) {
  fail_with_ = 403;  // the retry waits upload_retry_max
  options_.shutdown_wait = absl::Seconds(30);
  Open();
  PutTrace();
  ExpectRetryIn(options_.upload_retry_max);

  fail_with_ = 0;
  const absl::Time start = clock_.Now();
  ShutdownThread shutdown(store_.get());
  const bool attempted = attempts_.WaitForCount(2);
  const bool done = attempted && shutdown.WaitDone();
  if (!done) PassFlushDeadline(start + options_.shutdown_wait);  // lets the thread end
  ASSERT_TRUE(attempted) << "no attempt at once";
  ASSERT_TRUE(done) << "the flush waited on the clock";
  EXPECT_EQ(clock_.Now(), start);
  EXPECT_TRUE(attempts_.outcomes()[1].ok()) << attempts_.outcomes()[1];
  EXPECT_EQ(shutdown.report().uploaded, 1u);
  EXPECT_TRUE(shutdown.report().left.empty());
  EXPECT_EQ(State(), v1::STORAGE_STATE_UPLOADED);
  EXPECT_TRUE(store_->spool().AwaitingUpload().empty());
}

TEST_F(TraceUploaderTest, ShutdownWithTheBucketFailingEndsAtShutdownWaitAndTheNextStartUploads) {
  fail_with_ = 500;
  options_.shutdown_wait = absl::Seconds(10);
  Open();
  PutTrace();
  ExpectRetryIn(options_.upload_retry_initial);

  const absl::Time start = clock_.Now();
  {
    ShutdownThread shutdown(store_.get());
    const bool attempted = attempts_.WaitForCount(2);
    EXPECT_EQ(clock_.Now(), start);
    PassFlushDeadline(start + options_.shutdown_wait);
    ASSERT_TRUE(attempted) << "no attempt at once";
    ASSERT_TRUE(shutdown.WaitDone()) << "the flush outlived its deadline";
    EXPECT_EQ(shutdown.report().uploaded, 0u);
    EXPECT_EQ(shutdown.report().left, std::vector<std::string>{id_});
  }
  for (const absl::Status& outcome : attempts_.outcomes()) EXPECT_FALSE(outcome.ok());
  EXPECT_EQ(State(), v1::STORAGE_STATE_UPLOAD_PENDING);
  EXPECT_EQ(store_->spool().AwaitingUpload(), std::vector<std::string>{id_});

  // A start with the same spool takes it up.
  const size_t before = attempts_.outcomes().size();
  fail_with_ = 0;
  Open();
  ASSERT_TRUE(attempts_.WaitForCount(before + 1));
  EXPECT_TRUE(attempts_.outcomes()[before].ok()) << attempts_.outcomes()[before];
  EXPECT_EQ(State(), v1::STORAGE_STATE_UPLOADED);
}

TEST_F(TraceUploaderTest, ATraceCompletedOnceShutdownBeganJoinsTheFlush) {
  options_.shutdown_wait = absl::Seconds(30);
  Open();
  store_->BeginShutdown();
  PutTrace();
  const absl::Time start = clock_.Now();
  ShutdownThread shutdown(store_.get());
  const bool done = shutdown.WaitDone();
  if (!done) PassFlushDeadline(start + options_.shutdown_wait);
  ASSERT_TRUE(done);
  EXPECT_TRUE(attempts_.outcomes()[0].ok()) << attempts_.outcomes()[0];
  EXPECT_EQ(shutdown.report().uploaded, 1u);
  EXPECT_TRUE(shutdown.report().left.empty());
  EXPECT_EQ(State(), v1::STORAGE_STATE_UPLOADED);
}

}  // namespace
}  // namespace gpuctl::s3
