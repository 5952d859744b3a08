#include "daemon/hostctx/off_cpu.h"

#include "daemon/hostctx/testing/samples.h"
#include "gtest/gtest.h"

namespace gpuctl::hostctx {
namespace {

using testing::SampleAt;

ContextSwitch Out(uint32_t tid, uint64_t t, bool preempted = false) {
  return ContextSwitch{1, tid, t, true, preempted};
}
ContextSwitch In(uint32_t tid, uint64_t t) { return ContextSwitch{1, tid, t, false, false}; }

TEST(OffCpuTest, PairsSwitchOutWithTheNextSwitchInPerThread) {
  const std::vector<ContextSwitch> switches = {Out(7, 100), Out(8, 150, true), In(7, 200),
                                               In(8, 160),  Out(7, 300, true), In(7, 310)};
  const auto intervals = OffCpuIntervals(switches, 0, 1000);
  ASSERT_EQ(intervals.size(), 3u);
  EXPECT_EQ(intervals[0].tid, 7u);
  EXPECT_EQ(intervals[0].start_ns, 100u);
  EXPECT_EQ(intervals[0].end_ns, 200u);
  EXPECT_EQ(intervals[0].reason, OffCpuReason::kBlocked);
  EXPECT_EQ(intervals[1].reason, OffCpuReason::kPreempted);
  EXPECT_EQ(intervals[1].start_ns, 300u);
  EXPECT_EQ(intervals[2].tid, 8u);
  EXPECT_EQ(intervals[2].reason, OffCpuReason::kPreempted);
  EXPECT_EQ(intervals[2].end_ns, 160u);
}

TEST(OffCpuTest, OpenEndsAreClippedToTheWindow) {
  const std::vector<ContextSwitch> switches = {In(7, 150), Out(7, 400)};
  const auto intervals = OffCpuIntervals(switches, 100, 500);
  ASSERT_EQ(intervals.size(), 2u);
  EXPECT_EQ(intervals[0].reason, OffCpuReason::kUnknown);
  EXPECT_EQ(intervals[0].start_ns, 100u);
  EXPECT_EQ(intervals[0].end_ns, 150u);
  EXPECT_EQ(intervals[1].reason, OffCpuReason::kBlocked);
  EXPECT_EQ(intervals[1].start_ns, 400u);
  EXPECT_EQ(intervals[1].end_ns, 500u);
}

TEST(OffCpuTest, RepeatedRecordsDoNotMakeEmptyOrReversedIntervals) {
  const std::vector<ContextSwitch> switches = {Out(7, 100), Out(7, 120), In(7, 200), In(7, 210),
                                               Out(7, 600)};
  const auto intervals = OffCpuIntervals(switches, 0, 500);
  ASSERT_EQ(intervals.size(), 1u);
  EXPECT_EQ(intervals[0].start_ns, 100u);
  EXPECT_EQ(intervals[0].end_ns, 200u);
  EXPECT_EQ(OffCpuReasonName(OffCpuReason::kPreempted), "preempted");
}

TEST(OffCpuTest, ACaptureAddsThreadsWithoutRecordsAndClipsToTheirOpening) {
  HostCapture capture;
  capture.start_ns = 100;
  capture.stop_ns = 1000;
  capture.threads = {
      {1, 7, 150, "", ""}, {1, 8, 100, "", ""}, {1, 9, 400, "", ""}, {1, 10, 100, "", ""}};
  capture.switches = {In(7, 300)};                         // off from its opening
  capture.samples.push_back(SampleAt(1, 10, 500, {0x1}));  // ran: no interval
  const auto intervals = OffCpuIntervals(capture);
  ASSERT_EQ(intervals.size(), 3u);
  EXPECT_EQ(intervals[0].tid, 7u);
  EXPECT_EQ(intervals[0].start_ns, 150u);
  EXPECT_EQ(intervals[0].end_ns, 300u);
  EXPECT_EQ(intervals[1].tid, 8u);
  EXPECT_EQ(intervals[1].start_ns, 100u);
  EXPECT_EQ(intervals[1].end_ns, 1000u);
  EXPECT_EQ(intervals[1].reason, OffCpuReason::kUnknown);
  EXPECT_EQ(intervals[2].tid, 9u);
  EXPECT_EQ(intervals[2].start_ns, 400u);
}

TEST(OffCpuTest, AnIntervalCarriesTheChainSampledAtItsSwitchOut) {
  HostCapture capture;
  capture.start_ns = 0;
  capture.stop_ns = 10'000'000;
  capture.threads = {{1, 7, 0, "", ""}, {1, 8, 0, "", ""}};
  capture.switches = {Out(7, 2'000'000), In(7, 3'000'000),  Out(7, 5'000'000, true),
                      In(7, 6'000'000),  Out(8, 2'000'000), In(8, 2'500'000)};
  // Thread 7's two switch-outs (sampled a little before their records),
  // thread 8's sampled too far from its switch-out to be paired.
  capture.switch_stacks = {SampleAt(1, 7, 4'999'990, {0x30}), SampleAt(1, 7, 1'999'900, {0x20}),
                           SampleAt(1, 8, 2'000'000 - kSwitchStackSlackNs - 1, {0x40})};
  const auto intervals = OffCpuIntervals(capture);
  ASSERT_EQ(intervals.size(), 3u);
  EXPECT_EQ(intervals[0].reason, OffCpuReason::kBlocked);
  EXPECT_EQ(intervals[0].stack, 1);
  EXPECT_EQ(intervals[1].reason, OffCpuReason::kPreempted);
  EXPECT_EQ(intervals[1].stack, 0);
  EXPECT_EQ(intervals[2].tid, 8u);
  EXPECT_EQ(intervals[2].stack, -1);
}

TEST(OffCpuTest, APreemptedIntervalNamesTheTaskThatTookItsCpu) {
  HostCapture capture;
  capture.start_ns = 0;
  capture.stop_ns = 10'000'000;
  capture.threads = {{1, 7, 0, "", ""}};
  capture.switches = {Out(7, 2'000'000, true), In(7, 3'000'000),  Out(7, 5'000'000, true),
                      In(7, 6'000'000),        Out(7, 8'000'000), In(7, 9'000'000)};
  // The CPU-wide event saw the first preemption (by pid 900) and another
  // thread's; the second preemption went unseen.
  capture.preemptions = {CpuSwitch{1, 7, 2'000'000, 0, 900, 901, true, true},
                         CpuSwitch{1, 8, 5'000'000, 0, 902, 902, true, true}};
  const auto intervals = OffCpuIntervals(capture);
  ASSERT_EQ(intervals.size(), 3u);
  EXPECT_EQ(intervals[0].preempted_by, 900u);
  EXPECT_EQ(intervals[1].reason, OffCpuReason::kPreempted);
  EXPECT_EQ(intervals[1].preempted_by, 0u);
  EXPECT_EQ(intervals[2].reason, OffCpuReason::kBlocked);
  EXPECT_EQ(intervals[2].preempted_by, 0u);
}

}  // namespace
}  // namespace gpuctl::hostctx
