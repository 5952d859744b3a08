#include "daemon/scheduler/slot_decision.h"

#include <cmath>
#include <string>
#include <vector>

#include "daemon/common/trace_id.h"
#include "daemon/scheduler/test_rules_for_test.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon::scheduler {
namespace {

TEST(SlotDecisionTest, SlotOfFloorsFromTheUnixEpoch) {
  const absl::Duration hour = absl::Hours(1);
  const absl::Time t = UtcForTest(2026, 12, 2, 5, 59, 59);
  EXPECT_EQ(SlotOf(hour, t), 498941);
  EXPECT_EQ(SlotStart(hour, 498941), UtcForTest(2026, 12, 2, 5));
  EXPECT_EQ(SlotOf(hour, UtcForTest(2026, 12, 2, 6)), 498942);
  EXPECT_EQ(SlotOf(hour, absl::UnixEpoch() - absl::Seconds(1)), -1);
}

// The decision of one slot, pinned against the independent computation of
// schedule_hash_test.cc's vectors: draw, offset and id.
TEST(SlotDecisionTest, PinnedDecisions) {
  const ScheduleRule rule = TimeRuleForTest();
  struct Expected {
    std::string job;
    double draw;
    int64_t offset_ms;
    std::string trace_id;
  };
  const std::vector<Expected> expected = {
      {"42", 0.18739511968515044, 860862, "01a2352c-d73e-788c-948b-906aa5f4c71b"},
      {"43", 0.42069870527295505, 2575943, "01a23547-02c7-7f2e-8fad-083f90693e8e"},
      {"44", 0.6120779876402842, 2712500, "01a23549-1834-7479-85c9-df67582d4f54"},
  };
  for (const Expected& e : expected) {
    const SlotDecision d = DecideSlot("fleet-2026", rule, e.job, 498941);
    EXPECT_EQ(d.draw, e.draw) << e.job;
    EXPECT_EQ(d.sampled, e.draw < 0.2) << e.job;
    EXPECT_EQ(d.start - d.slot_start, absl::Milliseconds(e.offset_ms)) << e.job;
    EXPECT_EQ(d.trace_id, e.trace_id) << e.job;
  }
}

// Many "hosts" evaluating independently (a fresh rule object each, as a
// daemon built from the same file would have) reach identical decisions.
TEST(SlotDecisionTest, IndependentEvaluationsAgree) {
  for (int64_t slot = 498000; slot < 498200; ++slot) {
    const SlotDecision first = DecideSlot("fleet", TimeRuleForTest(), "job-a", slot);
    for (int host = 0; host < 8; ++host) {
      const ScheduleRule rule = TimeRuleForTest();
      const SlotDecision d = DecideSlot(std::string("fleet"), rule, std::string("job-a"), slot);
      ASSERT_EQ(d.sampled, first.sampled);
      ASSERT_EQ(d.start, first.start);
      ASSERT_EQ(d.trace_id, first.trace_id);
    }
  }
}

TEST(SlotDecisionTest, WindowFitsInsideTheSlotAndIdIsValidAndTimeOrdered) {
  const ScheduleRule rule = TimeRuleForTest("r", 1.0, absl::Minutes(1), absl::Seconds(15));
  std::string previous;
  for (int64_t slot = 29000000; slot < 29002000; ++slot) {
    const SlotDecision d = DecideSlot("s", rule, "42", slot);
    ASSERT_TRUE(d.sampled);
    ASSERT_GE(d.start, d.slot_start);
    ASSERT_LE(d.start + rule.window, d.slot_start + rule.period);
    ASSERT_TRUE(IsValidTraceId(d.trace_id)) << d.trace_id;
    ASSERT_EQ(*TraceIdTime(d.trace_id), d.start);
    ASSERT_LT(previous, d.trace_id);
    previous = d.trace_id;
  }
}

TEST(SlotDecisionTest, JobsSpreadOverThePeriod) {
  const ScheduleRule rule = TimeRuleForTest("r", 1.0, absl::Minutes(10), absl::Seconds(10));
  int first_half = 0;
  constexpr int kJobs = 1000;
  for (int job = 0; job < kJobs; ++job) {
    const SlotDecision d = DecideSlot("s", rule, std::to_string(job), 5);
    if (d.start - d.slot_start < absl::Minutes(5)) ++first_half;
  }
  // Binomial(1000, 0.5): sd ~16; 6 sd either way.
  EXPECT_GT(first_half, 400);
  EXPECT_LT(first_half, 600);
}

// The fraction of sampled slots is within statistical bounds of p.
TEST(SlotDecisionTest, SampledFractionMatchesProbability) {
  for (double p : {0.01, 0.1, 0.5, 0.9}) {
    const ScheduleRule rule = TimeRuleForTest("r", p, absl::Minutes(1), absl::Seconds(1));
    constexpr int kSlots = 20000;
    int sampled = 0;
    for (int64_t slot = 0; slot < kSlots; ++slot) {
      sampled += DecideSlot("seed", rule, "42", slot).sampled ? 1 : 0;
    }
    const double sd = std::sqrt(kSlots * p * (1 - p));
    EXPECT_NEAR(sampled, kSlots * p, 5 * sd) << "p=" << p;
  }
  const ScheduleRule always = TimeRuleForTest("r", 1.0);
  for (int64_t slot = 0; slot < 1000; ++slot) {
    ASSERT_TRUE(DecideSlot("seed", always, "42", slot).sampled);
  }
}

TEST(SlotDecisionTest, SeedRuleAndJobEachChangeTheDecision) {
  const ScheduleRule rule = TimeRuleForTest("r", 0.5);
  const ScheduleRule other = TimeRuleForTest("other", 0.5);
  int differ_seed = 0;
  int differ_rule = 0;
  int differ_job = 0;
  for (int64_t slot = 0; slot < 200; ++slot) {
    const SlotDecision d = DecideSlot("a", rule, "42", slot);
    differ_seed += d.trace_id != DecideSlot("b", rule, "42", slot).trace_id;
    differ_rule += d.trace_id != DecideSlot("a", other, "42", slot).trace_id;
    differ_job += d.trace_id != DecideSlot("a", rule, "43", slot).trace_id;
  }
  EXPECT_EQ(differ_seed, 200);
  EXPECT_EQ(differ_rule, 200);
  EXPECT_EQ(differ_job, 200);
}

// A daemon that restarts mid-slot computes the slot from its clock again:
// any instant of the slot gives the same decision.
TEST(SlotDecisionTest, RestartMidSlotGivesTheSameAnswer) {
  const ScheduleRule rule = TimeRuleForTest("r", 0.5, absl::Minutes(10), absl::Seconds(30));
  const absl::Time slot_start = UtcForTest(2026, 12, 2, 5, 10);
  const SlotDecision before = DecideSlot("s", rule, "42", SlotOf(rule.period, slot_start));
  for (absl::Duration into : {absl::ZeroDuration(), absl::Seconds(1), absl::Minutes(4),
                              absl::Minutes(10) - absl::Nanoseconds(1)}) {
    const SlotDecision after = DecideSlot("s", rule, "42", SlotOf(rule.period, slot_start + into));
    EXPECT_EQ(after.slot, before.slot);
    EXPECT_EQ(after.start, before.start);
    EXPECT_EQ(after.trace_id, before.trace_id);
  }
}

TEST(StepBlockTest, PinnedDecision) {
  const ScheduleRule rule = StepRuleForTest(1000, 10);
  const StepBlockDecision d =
      DecideStepBlock("fleet-2026", rule, "job-7", 12, UtcForTest(2026, 12, 2, 5, 42, 7));
  EXPECT_EQ(d.draw, 0.14318282393224468);
  EXPECT_TRUE(d.sampled);
  EXPECT_EQ(d.first_step, 12000u);
  EXPECT_EQ(d.trace_id, "01a2351f-b480-76b5-af0e-cbb818d3d65a");
  EXPECT_EQ(*TraceIdTime(d.trace_id), UtcForTest(2026, 12, 2, 5));
}

TEST(StepBlockTest, RanksAgreeByStepWithinTheHour) {
  const ScheduleRule rule = StepRuleForTest(500, 20);
  EXPECT_EQ(StepBlockOf(rule, 0), 0u);
  EXPECT_EQ(StepBlockOf(rule, 499), 0u);
  EXPECT_EQ(StepBlockOf(rule, 500), 1u);
  const absl::Time hour = UtcForTest(2026, 12, 2, 5);
  int sampled = 0;
  for (uint64_t block = 0; block < 4000; ++block) {
    const StepBlockDecision a = DecideStepBlock("s", rule, "j", block, hour + absl::Minutes(1));
    const StepBlockDecision b = DecideStepBlock("s", rule, "j", block, hour + absl::Minutes(59));
    ASSERT_EQ(a.sampled, b.sampled);
    ASSERT_EQ(a.trace_id, b.trace_id);
    ASSERT_TRUE(IsValidTraceId(a.trace_id));
    ASSERT_EQ(a.first_step, block * 500);
    sampled += a.sampled ? 1 : 0;
  }
  EXPECT_NEAR(sampled, 2000, 5 * std::sqrt(4000 * 0.25));
}

TEST(AnomalyDecisionTest, HostsSeeingTheSameBucketNameTheCaptureAlike) {
  const ScheduleRule rule = AnomalyRuleForTest();
  const absl::Time t = UtcForTest(2026, 3, 1, 10, 5);
  const AnomalyDecision a = DecideAnomaly("fleet", rule, "42", 230, 232, t);
  const AnomalyDecision b = DecideAnomaly("fleet", rule, "42", 299, 240, t + absl::Minutes(20));
  EXPECT_EQ(a.bucket, 2u);
  EXPECT_EQ(a.first_step, 300u);
  EXPECT_EQ(a.trace_id, b.trace_id);
  EXPECT_EQ(a.first_step, b.first_step);
  EXPECT_TRUE(IsValidTraceId(a.trace_id));

  EXPECT_NE(DecideAnomaly("fleet", rule, "42", 300, 302, t).trace_id, a.trace_id)
      << "another bucket";
  EXPECT_NE(DecideAnomaly("fleet", rule, "43", 230, 232, t).trace_id, a.trace_id) << "another job";
  EXPECT_NE(DecideAnomaly("other", rule, "42", 230, 232, t).trace_id, a.trace_id) << "another seed";
  ScheduleRule step_rule = StepRuleForTest(100, 5);
  step_rule.name = rule.name;
  EXPECT_NE(DecideStepBlock("fleet", step_rule, "42", 2, t).trace_id, a.trace_id)
      << "a step block of the same index is another domain";
}

TEST(AnomalyDecisionTest, TheFirstStepIsABucketBoundaryAheadOfTheHost) {
  const ScheduleRule rule = AnomalyRuleForTest();
  const absl::Time t = UtcForTest(2026, 3, 1, 10, 5);
  EXPECT_EQ(DecideAnomaly("fleet", rule, "42", 230, 302, t).first_step, 400u);
  EXPECT_EQ(DecideAnomaly("fleet", rule, "42", 230, 400, t).first_step, 400u);
  EXPECT_EQ(DecideAnomaly("fleet", rule, "42", 0, 0, t).first_step, 100u);
}

}  // namespace
}  // namespace gpuctl::daemon::scheduler
