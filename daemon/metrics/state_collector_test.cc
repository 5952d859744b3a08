#include "daemon/metrics/state_collector.h"

#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "daemon/common/event_loop.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace gpuctl::daemon::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class StateCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    loop_ = *EventLoop::Create();
    thread_ = std::thread([this] { loop_->Run(); });
  }
  void TearDown() override {
    loop_->Post([this] { loop_->Quit(); });
    thread_.join();
  }
  std::string Scrape(const StateCollector& collector) {
    return prometheus::TextSerializer().Serialize(collector.Collect());
  }

  std::unique_ptr<EventLoop> loop_;
  std::thread thread_;
};

TEST_F(StateCollectorTest, ServesTheCoreSnapshotTakenOnTheLoopAndTheStore) {
  std::thread::id snapshot_thread;
  CoreSnapshot snapshot;
  snapshot.attached = {{v1::PROCESS_ROLE_WORKER, "library", 3},
                       {v1::PROCESS_ROLE_LAUNCHER, "library", 1}};
  snapshot.captures_in_flight = 2;
  snapshot.ingest_running_bytes = 4096;
  snapshot.ingest_waiting_results = 1;
  StateCollector collector(
      {.loop = loop_.get(),
       .core =
           [&] {
             snapshot_thread = std::this_thread::get_id();
             return snapshot;
           },
       .storage =
           [] {
             StorageState s{.traces = 5, .bytes = 1000, .retention_deletions = 2};
             s.s3 = StorageState::Uploads{
                 .pending = 1, .oldest_pending_age = absl::Seconds(90), .uploaded_bytes = 77};
             return s;
           }});
  const std::string text = Scrape(collector);
  EXPECT_EQ(snapshot_thread, thread_.get_id());
  EXPECT_THAT(text, HasSubstr("gpuctld_attached_processes{kind=\"library\",role=\"worker\"} 3"));
  EXPECT_THAT(text, HasSubstr("gpuctld_attached_processes{kind=\"library\",role=\"launcher\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpuctld_captures_in_flight 2"));
  EXPECT_THAT(text, HasSubstr("gpuctld_ingest_bytes{state=\"converting\"} 4096"));
  EXPECT_THAT(text, HasSubstr("gpuctld_ingest_waiting_results 1"));
  EXPECT_THAT(text, HasSubstr("gpuctld_store_traces 5"));
  EXPECT_THAT(text, HasSubstr("gpuctld_store_retention_deletions_total 2"));
  EXPECT_THAT(text, HasSubstr("gpuctld_s3_uploads_pending 1"));
  EXPECT_THAT(text, HasSubstr("gpuctld_s3_oldest_pending_upload_age_seconds 90"));
  EXPECT_THAT(text, HasSubstr("gpuctld_s3_uploaded_bytes_total 77"));
  EXPECT_THAT(text, HasSubstr("gpuctld_metrics_stale_scrapes_total 0"));
}

TEST_F(StateCollectorTest, ABusyLoopGetsThePreviousSnapshotWithinTheDeadline) {
  int calls = 0;
  StateCollector collector({.loop = loop_.get(),
                            .core =
                                [&] {
                                  CoreSnapshot s;
                                  s.active_traces = ++calls;
                                  return s;
                                },
                            .deadline = absl::Milliseconds(100)});
  EXPECT_THAT(Scrape(collector), HasSubstr("gpuctld_active_traces 1"));
  // The loop is held by a long task: the scrape returns without it.
  absl::Notification release, held;
  loop_->Post([&] {
    held.Notify();
    release.WaitForNotification();
  });
  held.WaitForNotification();
  const std::string text = Scrape(collector);
  release.Notify();
  EXPECT_THAT(text, HasSubstr("gpuctld_active_traces 1"));
  EXPECT_THAT(text, HasSubstr("gpuctld_metrics_stale_scrapes_total 1"));
  // The late task ran into a snapshot nobody waits for; the next scrape
  // is fresh.
  EXPECT_THAT(Scrape(collector), HasSubstr("gpuctld_active_traces 3"));
}

TEST_F(StateCollectorTest, WithoutAnS3BackendNoUploadGauges) {
  StateCollector collector({.loop = loop_.get(),
                            .core = [] { return CoreSnapshot{}; },
                            .storage = [] { return StorageState{}; }});
  const std::string text = Scrape(collector);
  EXPECT_THAT(text, HasSubstr("gpuctld_store_bytes 0"));
  EXPECT_THAT(text, Not(HasSubstr("gpuctld_s3_")));
}

}  // namespace
}  // namespace gpuctl::daemon::metrics
