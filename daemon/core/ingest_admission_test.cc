#include "daemon/core/ingest_admission.h"

#include <vector>

#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

// Records the order in which entries start.
struct Started {
  std::vector<IngestAdmission::Id> ids;
  IngestAdmission::StartFn Fn() {
    return [this](IngestAdmission::Id id) { ids.push_back(id); };
  }
};

TEST(IngestAdmissionTest, StartsWithinTheCapAndQueuesTheRest) {
  IngestAdmission admission(100);
  Started started;
  auto a = admission.Submit(60, started.Fn());
  auto b = admission.Submit(40, started.Fn());
  auto c = admission.Submit(1, started.Fn());
  EXPECT_EQ(started.ids, (std::vector{a, b}));
  EXPECT_EQ(admission.running_bytes(), 100u);
  EXPECT_EQ(admission.waiting_count(), 1u);
  EXPECT_EQ(admission.waiting_bytes(), 1u);
  admission.Release(b);
  EXPECT_EQ(started.ids, (std::vector{a, b, c}));
  EXPECT_EQ(admission.running_bytes(), 61u);
}

TEST(IngestAdmissionTest, KeepsSubmissionOrderEvenWhenASmallerOneWouldFit) {
  IngestAdmission admission(100);
  Started started;
  auto a = admission.Submit(70, started.Fn());
  auto big = admission.Submit(50, started.Fn());
  auto small = admission.Submit(10, started.Fn());
  // `small` fits next to `a` but must not overtake `big`.
  EXPECT_EQ(started.ids, (std::vector{a}));
  admission.Release(a);
  EXPECT_EQ(started.ids, (std::vector{a, big, small}));
  EXPECT_EQ(admission.running_bytes(), 60u);
  EXPECT_EQ(admission.waiting_count(), 0u);
}

TEST(IngestAdmissionTest, OversizeEntryRunsAloneOnlyWhenNothingElseRuns) {
  IngestAdmission admission(100);
  Started started;
  auto a = admission.Submit(10, started.Fn());
  auto huge = admission.Submit(500, started.Fn());
  auto after = admission.Submit(10, started.Fn());
  EXPECT_EQ(started.ids, (std::vector{a}));
  admission.Release(a);
  EXPECT_EQ(started.ids, (std::vector{a, huge}));
  EXPECT_EQ(admission.running_count(), 1u);
  admission.Release(huge);
  EXPECT_EQ(started.ids, (std::vector{a, huge, after}));
}

TEST(IngestAdmissionTest, OversizeEntryAloneStartsAtOnce) {
  IngestAdmission admission(100);
  Started started;
  auto huge = admission.Submit(1000, started.Fn());
  EXPECT_EQ(started.ids, (std::vector{huge}));
  EXPECT_EQ(admission.running_bytes(), 1000u);
}

TEST(IngestAdmissionTest, CancelledWaiterNeverStartsAndUnblocksTheQueue) {
  IngestAdmission admission(100);
  Started started;
  auto a = admission.Submit(50, started.Fn());
  auto big = admission.Submit(80, started.Fn());
  auto c = admission.Submit(30, started.Fn());
  EXPECT_TRUE(admission.Cancel(big));
  // With the head gone, `c` fits next to `a`.
  EXPECT_EQ(started.ids, (std::vector{a, c}));
  EXPECT_EQ(admission.waiting_bytes(), 0u);
  admission.Release(a);
  admission.Release(c);
  admission.Release(big);  // unknown by now: ignored
  EXPECT_EQ(admission.running_bytes(), 0u);
  EXPECT_EQ(started.ids, (std::vector{a, c}));
}

TEST(IngestAdmissionTest, CancelLeavesARunningEntryHoldingItsBytes) {
  IngestAdmission admission(100);
  Started started;
  auto a = admission.Submit(100, started.Fn());
  auto b = admission.Submit(100, started.Fn());
  EXPECT_FALSE(admission.Cancel(a));
  EXPECT_EQ(started.ids, (std::vector{a}));
  EXPECT_EQ(admission.running_bytes(), 100u);
  admission.Release(a);
  EXPECT_EQ(started.ids, (std::vector{a, b}));
}

TEST(IngestAdmissionTest, StartCallbackMayReleaseReentrantly) {
  IngestAdmission admission(100);
  std::vector<IngestAdmission::Id> order;
  auto finish_at_once = [&](IngestAdmission::Id id) {
    order.push_back(id);
    admission.Release(id);
  };
  auto a = admission.Submit(100, finish_at_once);
  auto b = admission.Submit(100, finish_at_once);
  EXPECT_EQ(order, (std::vector{a, b}));
  EXPECT_EQ(admission.running_bytes(), 0u);
}

TEST(IngestAdmissionTest, ZeroCapAdmitsEverything) {
  IngestAdmission admission(0);
  Started started;
  for (int i = 0; i < 5; ++i) admission.Submit(uint64_t{1} << 40, started.Fn());
  EXPECT_EQ(started.ids.size(), 5u);
}

}  // namespace
}  // namespace gpuctl::daemon
