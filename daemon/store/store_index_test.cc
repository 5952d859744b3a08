#include "daemon/store/store_index.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "daemon/common/trace_id.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr uint64_t kMs = 1'700'000'000'000;

class StoreIndexTest : public ::testing::Test {
 protected:
  // The id of a trace created `ms` after kMs.
  std::string Id(int64_t ms) {
    auto it = ids_.find(ms);
    if (it != ids_.end()) return it->second;
    return ids_[ms] = GenerateTraceId(absl::FromUnixMillis(kMs + ms), gen_);
  }
  absl::Time At(int64_t ms) { return absl::FromUnixMillis(kMs + ms); }

  // A complete trace with one data file of `bytes` and a 100-byte manifest.
  void AddComplete(int64_t ms, const std::string& job, uint64_t bytes) {
    index_.RecordFile(Id(ms), At(ms), "f.json.gz", bytes);
    index_.RecordManifest(Id(ms), At(ms), job, 100);
  }

  absl::BitGen gen_;
  std::map<int64_t, std::string> ids_;
  StoreIndex index_;
};

TEST_F(StoreIndexTest, TracksFilesBytesAndCompletion) {
  index_.AddTrace(Id(1), At(1));
  index_.RecordFile(Id(1), At(1), "b.json.gz", 10);
  index_.RecordFile(Id(1), At(1), "a.json.gz", 20);
  index_.RecordFile(Id(1), At(1), "b.json.gz", 5);  // replaced
  StoreTotals totals = index_.Totals();
  EXPECT_EQ(totals.traces, 1u);
  EXPECT_EQ(totals.complete, 0u);
  EXPECT_EQ(totals.bytes, 25u);
  EXPECT_THAT(index_.Page("", "", 10), IsEmpty());  // in progress: not listed

  index_.RecordManifest(Id(1), At(1), "job", 100);
  auto trace = index_.Find(Id(1));
  ASSERT_TRUE(trace.has_value());
  EXPECT_EQ(trace->trace_id, Id(1));
  EXPECT_EQ(trace->created, At(1));
  EXPECT_EQ(trace->job_id, "job");
  EXPECT_TRUE(trace->complete);
  EXPECT_EQ(trace->total_bytes, 125u);
  using File = std::pair<std::string, uint64_t>;
  EXPECT_THAT(trace->files,
              ElementsAre(File{"a.json.gz", 20}, File{"b.json.gz", 5}, File{"manifest.json", 100}));
  totals = index_.Totals();
  EXPECT_EQ(totals.complete, 1u);
  EXPECT_EQ(totals.bytes, 125u);
  EXPECT_THAT(index_.Page("", "", 10), ElementsAre(Id(1)));
  EXPECT_FALSE(index_.Find(Id(2)).has_value());
}

TEST_F(StoreIndexTest, ForgetFileDropsOneFileFromTheTotals) {
  AddComplete(1, "j", 1000);
  AddComplete(2, "j", 10);
  EXPECT_TRUE(index_.ForgetFile(Id(1), "f.json.gz"));
  EXPECT_FALSE(index_.ForgetFile(Id(1), "f.json.gz"));
  EXPECT_FALSE(index_.ForgetFile(Id(3), "f.json.gz"));
  std::optional<StoredTrace> trace = index_.Find(Id(1));
  ASSERT_TRUE(trace.has_value());
  EXPECT_THAT(trace->files, ElementsAre(std::make_pair(std::string("manifest.json"), 100u)));
  EXPECT_EQ(trace->total_bytes, 100u);
  EXPECT_TRUE(trace->complete);
  EXPECT_EQ(index_.Totals().bytes, 210u);
  EXPECT_EQ(index_.Totals().complete, 2u);
}

TEST_F(StoreIndexTest, PagesNewestFirstByJob) {
  for (int i = 0; i < 7; ++i) AddComplete(i, i % 2 == 0 ? "even" : "odd", 1);
  // Added out of order, as a startup scan may.
  StoredTrace scanned;
  scanned.trace_id = Id(-5);
  scanned.created = At(-5);
  scanned.job_id = "odd";
  scanned.complete = true;
  scanned.files = {{"manifest.json", 7}, {"x", 3}};
  index_.Add(scanned);
  EXPECT_THAT(index_.Page("", "", 3), ElementsAre(Id(6), Id(5), Id(4)));
  EXPECT_THAT(index_.Page(Id(4), "", 3), ElementsAre(Id(3), Id(2), Id(1)));
  EXPECT_THAT(index_.Page(Id(1), "", 3), ElementsAre(Id(0), Id(-5)));
  EXPECT_THAT(index_.Page(Id(-5), "", 3), IsEmpty());
  EXPECT_THAT(index_.Page("", "odd", 10), ElementsAre(Id(5), Id(3), Id(1), Id(-5)));
  EXPECT_THAT(index_.Page(Id(3), "odd", 1), ElementsAre(Id(1)));
  EXPECT_THAT(index_.Page("", "even", 2), ElementsAre(Id(6), Id(4)));
  EXPECT_THAT(index_.Page("", "ev", 10), IsEmpty());     // no prefix matching
  EXPECT_THAT(index_.Page("", "evenx", 10), IsEmpty());  // nor the next job over
  EXPECT_EQ(index_.Find(Id(-5))->total_bytes, 10u);

  // A rewritten manifest moves the trace to its new job.
  index_.RecordManifest(Id(6), At(6), "odd", 100);
  EXPECT_THAT(index_.Page("", "even", 10), ElementsAre(Id(4), Id(2), Id(0)));
  EXPECT_THAT(index_.Page("", "odd", 1), ElementsAre(Id(6)));
  EXPECT_EQ(index_.Totals().complete, 8u);
}

TEST_F(StoreIndexTest, RetentionTakesOldestEvictableFirst) {
  AddComplete(0, "j", 1000);      // pinned
  AddComplete(1, "j", 1000);      // awaiting upload
  index_.AddTrace(Id(2), At(2));  // in progress
  index_.RecordFile(Id(2), At(2), "f", 1000);
  AddComplete(3, "j", 1000);
  AddComplete(4, "j", 1000);
  AddComplete(5, "j", 1000);
  ASSERT_TRUE(index_.Pin(Id(0)));
  ASSERT_TRUE(index_.SetAwaitingUpload(Id(1), true));
  EXPECT_EQ(index_.Totals().awaiting_upload, 1u);

  // Five complete traces (the one in progress does not count) for three.
  std::vector<Eviction> taken = index_.TakeEvictions({0, absl::ZeroDuration(), 3}, At(10));
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].trace_id, Id(3));
  EXPECT_EQ(taken[0].reason, EvictionReason::kMaxCount);
  EXPECT_EQ(taken[0].bytes, 1100u);
  EXPECT_EQ(taken[0].created, At(3));
  EXPECT_EQ(taken[1].trace_id, Id(4));
  // Being deleted: gone from listings, totals and Find, and cannot be pinned.
  EXPECT_THAT(index_.Page("", "", 10), ElementsAre(Id(5), Id(1), Id(0)));
  EXPECT_THAT(index_.Page("", "j", 10), ElementsAre(Id(5), Id(1), Id(0)));
  EXPECT_EQ(index_.Totals().traces, 4u);
  EXPECT_FALSE(index_.Find(Id(3)).has_value());
  EXPECT_FALSE(index_.Pin(Id(3)));
  // A second pass skips the protected ones and those already taken.
  taken = index_.TakeEvictions({0, absl::ZeroDuration(), 2}, At(10));
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].trace_id, Id(5));
  index_.AbortDelete(Id(5));
  index_.FinishDelete(Id(3));
  index_.AbortDelete(Id(4));  // still whole on disk
  EXPECT_THAT(index_.Page("", "", 10), ElementsAre(Id(5), Id(4), Id(1), Id(0)));
  EXPECT_EQ(index_.Totals().traces, 5u);

  // Released protections make the older traces evictable again.
  index_.Unpin(Id(0));
  index_.SetAwaitingUpload(Id(1), false);
  taken = index_.TakeEvictions({2200, absl::ZeroDuration(), 0}, At(10));
  ASSERT_EQ(taken.size(), 3u);
  EXPECT_EQ(taken[0].trace_id, Id(0));
  EXPECT_EQ(taken[0].reason, EvictionReason::kMaxBytes);
  EXPECT_EQ(taken[1].trace_id, Id(1));
  EXPECT_EQ(taken[2].trace_id, Id(4));  // the one in progress stays
  EXPECT_EQ(index_.Totals().bytes, 1000u + 1100u);
}

TEST_F(StoreIndexTest, AgeStopsAtTheFirstYoungEnoughTrace) {
  for (int i = 0; i < 5; ++i) AddComplete(i * 1000, "j", 1);
  auto taken = index_.TakeEvictions({0, absl::Milliseconds(2500), 0}, At(4000));
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].trace_id, Id(0));
  EXPECT_EQ(taken[1].trace_id, Id(1000));
  EXPECT_EQ(taken[1].reason, EvictionReason::kMaxAge);
  EXPECT_THAT(index_.TakeEvictions({}, At(1'000'000)), IsEmpty());  // unlimited
}

TEST_F(StoreIndexTest, ExplicitDeleteRespectsPinsAndUploads) {
  AddComplete(0, "j", 1);
  index_.AddTrace(Id(1), At(1));
  EXPECT_EQ(index_.TakeForDelete(Id(9)).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(index_.Pin(Id(0)));
  EXPECT_EQ(index_.TakeForDelete(Id(0)).code(), absl::StatusCode::kFailedPrecondition);
  index_.Unpin(Id(0));
  index_.SetAwaitingUpload(Id(0), true);
  EXPECT_EQ(index_.TakeForDelete(Id(0)).code(), absl::StatusCode::kFailedPrecondition);
  index_.SetAwaitingUpload(Id(0), false);
  EXPECT_TRUE(index_.TakeForDelete(Id(0)).ok());
  EXPECT_EQ(index_.TakeForDelete(Id(0)).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(index_.TakeForDelete(Id(1)).ok());  // in progress, but nobody holds it
  index_.FinishDelete(Id(0));
  index_.FinishDelete(Id(1));
  EXPECT_EQ(index_.Totals().traces, 0u);
  EXPECT_EQ(index_.Totals().bytes, 0u);
}

TEST_F(StoreIndexTest, PinsCountPerIdEvenBeforeTheTraceExists) {
  ASSERT_TRUE(index_.Pin(Id(0)));
  ASSERT_TRUE(index_.Pin(Id(0)));
  AddComplete(0, "j", 1);
  EXPECT_EQ(index_.Find(Id(0))->pins, 2);
  index_.Unpin(Id(0));
  EXPECT_THAT(index_.TakeEvictions({0, absl::ZeroDuration(), 0}, At(0)), IsEmpty());
  EXPECT_THAT(index_.TakeEvictions({1, absl::ZeroDuration(), 0}, At(0)), IsEmpty());
  index_.Unpin(Id(0));
  index_.Unpin(Id(0));  // extra unpins are harmless
  EXPECT_EQ(index_.TakeEvictions({1, absl::ZeroDuration(), 0}, At(0)).size(), 1u);
}

TEST_F(StoreIndexTest, AwaitingUploadListsOldestFirst) {
  AddComplete(2, "j", 1);
  AddComplete(1, "j", 1);
  AddComplete(3, "j", 1);
  EXPECT_FALSE(index_.SetAwaitingUpload(Id(7), true));
  ASSERT_TRUE(index_.SetAwaitingUpload(Id(3), true));
  ASSERT_TRUE(index_.SetAwaitingUpload(Id(1), true));
  EXPECT_THAT(index_.AwaitingUpload(), ElementsAre(Id(1), Id(3)));
  EXPECT_TRUE(index_.Find(Id(1))->awaiting_upload);
}

TEST_F(StoreIndexTest, WritersWaitForADeletionToEnd) {
  AddComplete(0, "j", 1);
  ASSERT_TRUE(index_.TakeForDelete(Id(0)).ok());
  std::atomic<bool> pinned{false};
  std::thread writer([&] {
    index_.PinForWrite(Id(0));
    pinned = true;
  });
  // The writer cannot get through while the deletion runs; it must get
  // through once it ends. (Checking the first half can only be sampled.)
  for (int i = 0; i < 1000; ++i) {
    std::this_thread::yield();
    ASSERT_FALSE(pinned.load());
  }
  index_.FinishDelete(Id(0));
  writer.join();
  EXPECT_TRUE(pinned.load());
  index_.RecordFile(Id(0), At(0), "f", 5);
  EXPECT_EQ(index_.Find(Id(0))->pins, 1);
  EXPECT_FALSE(index_.Find(Id(0))->complete);
}

TEST_F(StoreIndexTest, WritersWaitForAnAbortedDeletionToEnd) {
  AddComplete(0, "j", 1);
  ASSERT_TRUE(index_.TakeForDelete(Id(0)).ok());
  std::atomic<bool> pinned{false};
  std::thread writer([&] {
    index_.PinForWrite(Id(0));
    pinned = true;
  });
  for (int i = 0; i < 1000; ++i) {
    std::this_thread::yield();
    ASSERT_FALSE(pinned.load());
  }
  // Aborting must wake the writer (it would otherwise wait for ever).
  index_.AbortDelete(Id(0));
  writer.join();
  std::optional<StoredTrace> trace = index_.Find(Id(0));
  ASSERT_TRUE(trace.has_value());
  EXPECT_TRUE(trace->complete);
  EXPECT_EQ(trace->pins, 1);
}

TEST_F(StoreIndexTest, WritersWaitUntilADeletedTraceIsAddedBack) {
  AddComplete(0, "j", 1);
  ASSERT_TRUE(index_.TakeForDelete(Id(0)).ok());
  std::atomic<bool> pinned{false};
  std::thread writer([&] {
    index_.PinForWrite(Id(0));
    pinned = true;
  });
  for (int i = 0; i < 1000; ++i) {
    std::this_thread::yield();
    ASSERT_FALSE(pinned.load());
  }
  // A rescan replacing the entry ends its deletion too.
  StoredTrace scanned;
  scanned.trace_id = Id(0);
  scanned.created = At(0);
  index_.Add(scanned);
  writer.join();
  std::optional<StoredTrace> trace = index_.Find(Id(0));
  ASSERT_TRUE(trace.has_value());
  EXPECT_EQ(trace->pins, 1);
}

TEST_F(StoreIndexTest, ConcurrentUseKeepsTotalsConsistent) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 300;
  std::vector<std::thread> threads;
  std::vector<std::string> ids(kThreads * kPerThread);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = Id(static_cast<int64_t>(i));
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string& id = ids[t * kPerThread + i];
        index_.PinForWrite(id);
        index_.RecordFile(id, At(t * kPerThread + i), "f", 10);
        index_.RecordManifest(id, At(t * kPerThread + i), t % 2 ? "a" : "b", 10);
        index_.Unpin(id);
        for (const Eviction& e : index_.TakeEvictions({0, absl::ZeroDuration(), 100}, At(0))) {
          index_.FinishDelete(e.trace_id);
        }
        index_.Page("", "a", 20);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Eviction& e : index_.TakeEvictions({0, absl::ZeroDuration(), 100}, At(0))) {
    index_.FinishDelete(e.trace_id);
  }
  StoreTotals totals = index_.Totals();
  EXPECT_EQ(totals.traces, 100u);
  EXPECT_EQ(totals.complete, 100u);
  EXPECT_EQ(totals.bytes, 2000u);
  std::vector<std::string> page = index_.Page("", "", 1000);
  ASSERT_EQ(page.size(), 100u);
  EXPECT_TRUE(std::is_sorted(page.rbegin(), page.rend()));
  EXPECT_EQ(index_.Page("", "a", 1000).size() + index_.Page("", "b", 1000).size(), 100u);
}

}  // namespace
}  // namespace gpuctl::daemon
