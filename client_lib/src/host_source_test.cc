#include "client_lib/src/host_source.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <set>
#include <thread>
#include <vector>

#include "client_lib/src/payload_decoder_for_test.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::client {
namespace {

using testing::DecodedPayload;
using testing::DecodePayload;

constexpr uint16_t kRange = static_cast<uint16_t>(records::Kind::kRange);
constexpr uint16_t kStep = static_cast<uint16_t>(records::Kind::kStep);
constexpr uint16_t kThreadName = static_cast<uint16_t>(records::Kind::kThreadName);

// Advances 10 ns on every read, so every event has a distinct timestamp.
class TickingClock final : public Clock {
 public:
  int64_t RealtimeNs() override { return now_.fetch_add(10) + 10; }
  int64_t MonotonicNs() override { return RealtimeNs(); }
  int64_t Peek() const { return now_.load(); }

 private:
  std::atomic<int64_t> now_{1'000'000};
};

class HostSourceTest : public ::testing::Test {
 protected:
  void Open(uint64_t cap = 0) {
    PrepareError error;
    ASSERT_TRUE(source_.Prepare({"t", cap}, &error));
    start_ = clock_.RealtimeNs();
    source_.Start(start_);
  }
  DecodedPayload CloseAndDecode() {
    end_ = clock_.RealtimeNs();
    source_.Stop(end_);
    RecordWriter writer;
    const CollectStats stats = source_.Collect(writer);
    std::optional<DecodedPayload> p =
        DecodePayload(writer.Finish({stats.dropped_events, start_, end_, 1}));
    EXPECT_TRUE(p.has_value());
    return p.value_or(DecodedPayload{});
  }

  AnnotationState state_;
  TickingClock clock_;
  HostSource source_{&state_, &clock_};
  int64_t start_ = 0;
  int64_t end_ = 0;
};

TEST_F(HostSourceTest, GateIsSetOnlyWhileTheWindowIsOpen) {
  EXPECT_EQ(state_.gate.load(), 0u);
  Open();
  EXPECT_EQ(state_.gate.load(), kGateCapturing);
  CloseAndDecode();
  EXPECT_EQ(state_.gate.load(), 0u);
}

TEST_F(HostSourceTest, NestedRangesHaveDepthsAndContainEachOther) {
  Open();
  source_.Push("outer");
  source_.Push("inner");
  source_.Pop();
  source_.Pop();
  const DecodedPayload p = CloseAndDecode();
  ASSERT_EQ(p.Ranges("outer").size(), 1u);
  ASSERT_EQ(p.Ranges("inner").size(), 1u);
  const auto outer = p.Ranges("outer")[0];
  const auto inner = p.Ranges("inner")[0];
  EXPECT_EQ(outer.depth, 0u);
  EXPECT_EQ(inner.depth, 1u);
  EXPECT_LT(outer.start_ns, inner.start_ns);
  EXPECT_LT(inner.end_ns, outer.end_ns);
  EXPECT_GE(outer.start_ns, start_);
  EXPECT_LE(outer.end_ns, end_);
  EXPECT_NE(outer.range_id, inner.range_id);
  EXPECT_EQ(outer.tid, inner.tid);
}

TEST_F(HostSourceTest, UnmatchedPopIsIgnored) {
  Open();
  source_.Pop();
  source_.Push("a");
  source_.Pop();
  source_.Pop();
  const DecodedPayload p = CloseAndDecode();
  EXPECT_EQ(p.OfKind(kRange).size(), 1u);
  EXPECT_EQ(p.dropped_events, 0u);
}

TEST_F(HostSourceTest, RangesOpenAtWindowEndAreClosedThere) {
  Open();
  source_.Push("still-open");
  source_.Push("nested-open");
  const DecodedPayload p = CloseAndDecode();
  ASSERT_EQ(p.Ranges("still-open").size(), 1u);
  ASSERT_EQ(p.Ranges("nested-open").size(), 1u);
  EXPECT_EQ(p.Ranges("still-open")[0].end_ns, end_);
  EXPECT_EQ(p.Ranges("nested-open")[0].end_ns, end_);
  EXPECT_EQ(p.Ranges("nested-open")[0].depth, 1u);
}

TEST_F(HostSourceTest, EventsAfterTheEndInstantAreClippedOrDropped) {
  // The end instant is fixed before the gate closes; threads keep recording
  // until Stop, and nothing may end before it starts or lie past the end.
  Open();
  source_.Push("spans-end");
  source_.Push("ends-after");
  const int64_t end = clock_.RealtimeNs();
  source_.Pop();  // "ends-after" ends after the end instant
  source_.Push("starts-after");
  source_.Pop();
  source_.Push("open-after");
  source_.Step();
  source_.Stop(end);
  RecordWriter writer;
  const CollectStats stats = source_.Collect(writer);
  std::optional<DecodedPayload> p =
      DecodePayload(writer.Finish({stats.dropped_events, start_, end, 1}));
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(p->Ranges("starts-after").empty());
  EXPECT_TRUE(p->Ranges("open-after").empty());
  EXPECT_TRUE(p->OfKind(kStep).empty());
  ASSERT_EQ(p->Ranges("spans-end").size(), 1u);
  ASSERT_EQ(p->Ranges("ends-after").size(), 1u);
  EXPECT_EQ(p->Ranges("spans-end")[0].end_ns, end);
  EXPECT_EQ(p->Ranges("ends-after")[0].end_ns, end);
  for (const auto& r : p->OfKind(kRange)) EXPECT_LE(r.start_ns, r.end_ns);
}

TEST_F(HostSourceTest, AnArmedWindowLeavesOutWhatBeganBeforeItsStart) {
  // Started ahead of the window's start instant (an armed time window):
  // threads record from then on, and the trace is what a window opened at
  // the instant would have recorded.
  PrepareError error;
  ASSERT_TRUE(source_.Prepare({"t", 0}, &error));
  source_.Start(clock_.Peek() + 45);  // four clock reads from now
  source_.Push("ends-before");        // +10
  source_.Pop();                      // +20
  source_.Push("spans-start");        // +30
  source_.Step();                     // +40: before the start
  const int64_t start = clock_.Peek() + 5;
  source_.Push("inside");  // +50
  source_.Step();          // +60
  source_.Pop();           // +70: "inside" ends
  source_.Pop();           // +80: "spans-start" ends
  start_ = start;
  const DecodedPayload p = CloseAndDecode();
  EXPECT_TRUE(p.Ranges("ends-before").empty());
  EXPECT_TRUE(p.Ranges("spans-start").empty());
  ASSERT_EQ(p.Ranges("inside").size(), 1u);
  EXPECT_EQ(p.Ranges("inside")[0].start_ns, start + 5);
  EXPECT_EQ(p.Ranges("inside")[0].depth, 0u) << "the range begun before does not count";
  const std::vector<testing::DecodedEvent> steps = p.OfKind(kStep);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].start_ns, start + 15);
  EXPECT_EQ(p.dropped_events, 0u) << "what lies before the window is not a drop";
}

TEST_F(HostSourceTest, RangePushedBeforeTheWindowIsNotRecordedAndItsPopIsIgnored) {
  source_.Push("before");  // window closed: nothing
  Open();
  source_.Pop();
  source_.Push("inside");
  source_.Pop();
  const DecodedPayload p = CloseAndDecode();
  EXPECT_TRUE(p.Ranges("before").empty());
  ASSERT_EQ(p.Ranges("inside").size(), 1u);
  EXPECT_EQ(p.Ranges("inside")[0].depth, 0u);
}

TEST_F(HostSourceTest, NothingIsRecordedOutsideAWindow) {
  source_.Push("x");
  source_.Pop();
  source_.Step();
  Open();
  CloseAndDecode();
  source_.Push("after");
  source_.Pop();
  source_.StepN(5);
  RecordWriter writer;
  EXPECT_EQ(source_.Collect(writer).dropped_events, 0u);
  EXPECT_EQ(writer.event_count(), 0u);
}

TEST_F(HostSourceTest, RecordsBeyondTheCapAreDroppedAndCounted) {
  Open(/*cap=*/5 * records::kRangeSize);
  for (int i = 0; i < 8; ++i) {
    source_.Push("r");
    source_.Pop();
  }
  source_.Step();  // no room left
  const DecodedPayload p = CloseAndDecode();
  EXPECT_EQ(p.OfKind(kRange).size(), 5u);
  EXPECT_TRUE(p.OfKind(kStep).empty());
  EXPECT_EQ(p.dropped_events, 4u);
}

TEST_F(HostSourceTest, DroppedPushStillMatchesItsPop) {
  Open(/*cap=*/records::kRangeSize);
  source_.Push("kept");
  source_.Push("dropped");
  source_.Pop();  // pops "dropped"
  source_.Pop();  // pops "kept"
  const DecodedPayload p = CloseAndDecode();
  ASSERT_EQ(p.Ranges("kept").size(), 1u);
  EXPECT_LT(p.Ranges("kept")[0].end_ns, end_);  // closed by its pop, not by the window end
  EXPECT_EQ(p.dropped_events, 1u);
}

TEST_F(HostSourceTest, StepsCountAndStepNSetsTheCounter) {
  source_.Step();       // outside: counts but does not record
  MarkStep(state_, 1);  // the API's fast path outside a window
  Open();
  source_.Step();
  source_.StepN(100);
  source_.Step();
  const DecodedPayload p = CloseAndDecode();
  const auto steps = p.OfKind(kStep);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].step, 2u);
  EXPECT_EQ(steps[1].step, 100u);
  EXPECT_EQ(steps[2].step, 101u);
}

TEST_F(HostSourceTest, ThreadsRecordIntoTheirOwnBuffersWithNames) {
  constexpr int kThreads = 4;
  constexpr int kRangesPerThread = 500;
  Open();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t] {
      const std::string name = "worker-" + std::to_string(t);
      pthread_setname_np(pthread_self(), name.c_str());
      for (int i = 0; i < kRangesPerThread; ++i) {
        source_.Push(name.c_str());
        source_.Push("inner");
        source_.Pop();
        source_.Pop();
      }
    });
  }
  for (auto& th : threads) th.join();  // threads exit inside the window
  const DecodedPayload p = CloseAndDecode();
  EXPECT_EQ(p.dropped_events, 0u);
  EXPECT_EQ(p.Ranges("inner").size(), static_cast<size_t>(kThreads * kRangesPerThread));
  std::set<uint32_t> tids;
  for (int t = 0; t < kThreads; ++t) {
    const auto ranges = p.Ranges("worker-" + std::to_string(t));
    ASSERT_EQ(ranges.size(), static_cast<size_t>(kRangesPerThread));
    tids.insert(ranges[0].tid);
    for (const auto& r : ranges) EXPECT_EQ(r.tid, ranges[0].tid);
  }
  EXPECT_EQ(tids.size(), static_cast<size_t>(kThreads));
  std::set<std::string> names;
  for (const auto& e : p.OfKind(kThreadName)) names.insert(e.name);
  for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(names.count("worker-" + std::to_string(t)));
}

TEST_F(HostSourceTest, ConcurrentWritersRacingTheWindowCloseAreSafe) {
  Open(/*cap=*/1 << 20);
  std::atomic<bool> run{true};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      while (run.load()) {
        source_.Push("spin");
        source_.Step();
        source_.Pop();
      }
    });
  }
  CloseAndDecode();
  for (int round = 0; round < 20; ++round) {
    Open(/*cap=*/1 << 20);
    const DecodedPayload p = CloseAndDecode();
    for (const auto& r : p.OfKind(kRange)) EXPECT_LE(r.end_ns, end_);
  }
  run.store(false);
  for (auto& th : threads) th.join();
}

TEST_F(HostSourceTest, AbortDiscardsRecords) {
  Open();
  source_.Push("a");
  source_.Pop();
  source_.Abort();
  EXPECT_EQ(state_.gate.load(), 0u);
  RecordWriter writer;
  source_.Collect(writer);
  EXPECT_EQ(writer.event_count(), 0u);
}

}  // namespace
}  // namespace gpuctl::client
