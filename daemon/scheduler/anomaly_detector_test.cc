#include "daemon/scheduler/anomaly_detector.h"

#include <vector>

#include "gtest/gtest.h"

namespace gpuctl::daemon::scheduler {
namespace {

constexpr absl::Duration kStep = absl::Milliseconds(100);

// A process that has marked steps every `kStep` up to `now`: `count`
// durations, the newest ending at the last mark.
class SteppingProcess {
 public:
  SteppingProcess(int32_t pid, int32_t rank, absl::Time now) {
    p_.pid = pid;
    p_.rank = rank;
    p_.last_step_time = now;
  }
  // Marks the next step at `at` (its predecessor took `at - last mark`).
  void Mark(absl::Time at) {
    if (p_.last_step_time.has_value()) {
      p_.recent.push_back(at - *p_.last_step_time);
      ++p_.durations_total;
    }
    ++p_.current_step;
    p_.last_step_time = at;
  }
  void Steady(int n, absl::Time* now) {
    for (int i = 0; i < n; ++i) Mark(*now += kStep);
  }
  const ProcessSteps& steps() const { return p_; }

 private:
  ProcessSteps p_;
};

AnomalyParams Params() {
  AnomalyParams params;
  params.slow_factor = 3;
  params.hang_after = absl::Seconds(30);
  params.min_step = 10;
  params.min_samples = 8;
  params.cooldown = absl::Minutes(10);
  return params;
}

class AnomalyDetectorTest : public ::testing::Test {
 protected:
  Detection Observe(const std::vector<const SteppingProcess*>& processes) {
    std::vector<ProcessSteps> steps;
    steps.reserve(processes.size());
    for (const SteppingProcess* p : processes) steps.push_back(p->steps());
    return detector_.Observe(steps, now_);
  }

  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  JobAnomalyDetector detector_{Params()};
};

TEST_F(AnomalyDetectorTest, NothingIsJudgedDuringWarmUp) {
  SteppingProcess p(7, 0, now_);
  p.Steady(5, &now_);
  EXPECT_EQ(Observe({&p}).verdict, AnomalyVerdict::kNone);
  p.Mark(now_ += 10 * kStep);  // slow, but step 6 is before min_step 10
  EXPECT_EQ(Observe({&p}).verdict, AnomalyVerdict::kNone);
  now_ += absl::Minutes(5);  // and a stop before min_step is no hang
  EXPECT_EQ(Observe({&p}).verdict, AnomalyVerdict::kNone);
}

TEST_F(AnomalyDetectorTest, AFinishedSlowStepIsComparedWithTheRollingMedian) {
  SteppingProcess p(7, 3, now_);
  p.Steady(20, &now_);
  EXPECT_EQ(Observe({&p}).verdict, AnomalyVerdict::kNone) << "history is not news";
  p.Steady(3, &now_);
  EXPECT_EQ(Observe({&p}).verdict, AnomalyVerdict::kNone);
  p.Mark(now_ += 5 * kStep);  // step 23 took 500 ms
  p.Steady(2, &now_);
  Detection d = Observe({&p});
  ASSERT_EQ(d.verdict, AnomalyVerdict::kAnomaly);
  EXPECT_EQ(d.anomaly.kind, AnomalyKind::kSlowStep);
  EXPECT_EQ(d.anomaly.pid, 7);
  EXPECT_EQ(d.anomaly.rank, 3);
  EXPECT_EQ(d.anomaly.step, 23u);
  EXPECT_EQ(d.anomaly.step_time, 5 * kStep);
  EXPECT_EQ(d.anomaly.median, kStep);
  EXPECT_FALSE(d.anomaly.in_progress);
  EXPECT_EQ(Observe({&p}).verdict, AnomalyVerdict::kNone) << "judged once";
}

TEST_F(AnomalyDetectorTest, AStepNotSlowerThanTheFactorIsNoAnomaly) {
  SteppingProcess p(7, 0, now_);
  p.Steady(20, &now_);
  Observe({&p});
  p.Mark(now_ += 3 * kStep);  // exactly 3x: not slower than the factor
  EXPECT_EQ(Observe({&p}).verdict, AnomalyVerdict::kNone);
}

TEST_F(AnomalyDetectorTest, ARunningSlowStepIsReportedOnceAndNotAgainWhenItEnds) {
  SteppingProcess p(7, 0, now_);
  p.Steady(20, &now_);
  Observe({&p});
  now_ += 2 * kStep;
  EXPECT_EQ(Observe({&p}).verdict, AnomalyVerdict::kNone) << "200 ms so far";
  now_ += 2 * kStep;
  Detection d = Observe({&p});
  ASSERT_EQ(d.verdict, AnomalyVerdict::kAnomaly);
  EXPECT_TRUE(d.anomaly.in_progress);
  EXPECT_EQ(d.anomaly.step, 20u);
  EXPECT_EQ(d.anomaly.step_time, 4 * kStep);
  now_ += absl::Seconds(1);
  EXPECT_EQ(Observe({&p}).verdict, AnomalyVerdict::kNone) << "still the same step";
  p.Mark(now_ += kStep);
  p.Steady(2, &now_);
  EXPECT_EQ(Observe({&p}).verdict, AnomalyVerdict::kNone) << "its end is no new anomaly";
}

TEST_F(AnomalyDetectorTest, StepsThatStopAreAHangEvenWithoutAFactor) {
  AnomalyParams params = Params();
  params.slow_factor = 0;
  JobAnomalyDetector detector(params);
  SteppingProcess p(7, 0, now_);
  p.Steady(20, &now_);
  std::vector<ProcessSteps> steps{p.steps()};
  now_ += absl::Seconds(29);
  EXPECT_EQ(detector.Observe(steps, now_).verdict, AnomalyVerdict::kNone);
  now_ += absl::Seconds(1);
  Detection d = detector.Observe(steps, now_);
  ASSERT_EQ(d.verdict, AnomalyVerdict::kAnomaly);
  EXPECT_EQ(d.anomaly.kind, AnomalyKind::kHang);
  EXPECT_EQ(d.anomaly.step, 20u);
  EXPECT_EQ(d.anomaly.step_time, absl::Seconds(30));
  EXPECT_EQ(d.anomaly.median, kStep);
  now_ += absl::Hours(1);
  EXPECT_EQ(detector.Observe(steps, now_).verdict, AnomalyVerdict::kNone) << "reported once";
}

TEST_F(AnomalyDetectorTest, AHangOutranksASlowStepAndTheSlowestStepIsReported) {
  SteppingProcess a(1, 0, now_), b(2, 1, now_), c(3, 2, now_);
  absl::Time tb = now_, tc = now_;
  a.Steady(20, &now_);
  b.Steady(20, &tb);
  c.Steady(20, &tc);
  Observe({&a, &b, &c});
  b.Mark(tb += 4 * kStep);
  c.Mark(tc += 6 * kStep);
  a.Steady(6, &now_);
  Detection d = Observe({&a, &b, &c});
  ASSERT_EQ(d.verdict, AnomalyVerdict::kAnomaly);
  EXPECT_EQ(d.anomaly.pid, 3) << "6x is worse than 4x";

  detector_ = JobAnomalyDetector(Params());
  Observe({&a, &b});
  b.Mark(tb += 9 * kStep);
  now_ = tb + absl::Seconds(30);  // a stopped after its last mark
  d = Observe({&a, &b});
  ASSERT_EQ(d.verdict, AnomalyVerdict::kAnomaly);
  EXPECT_EQ(d.anomaly.kind, AnomalyKind::kHang);
  EXPECT_EQ(d.anomaly.pid, 1);
}

TEST_F(AnomalyDetectorTest, AnomaliesWithinTheCoolDownAreReportedAsCoolingDown) {
  SteppingProcess p(7, 0, now_);
  p.Steady(20, &now_);
  Observe({&p});
  p.Mark(now_ += 5 * kStep);
  EXPECT_EQ(Observe({&p}).verdict, AnomalyVerdict::kAnomaly);
  p.Steady(5, &now_);
  p.Mark(now_ += 5 * kStep);
  Detection d = Observe({&p});
  EXPECT_EQ(d.verdict, AnomalyVerdict::kCoolingDown);
  EXPECT_EQ(d.anomaly.step_time, 5 * kStep);
  now_ += absl::Minutes(10);
  p.Steady(5, &now_);
  p.Mark(now_ += 5 * kStep);
  EXPECT_EQ(Observe({&p}).verdict, AnomalyVerdict::kAnomaly) << "the cool-down is over";
}

// A library whose step page has no durations (version 1) gives no median:
// its process can hang, never be slow.
TEST_F(AnomalyDetectorTest, WithoutDurationsOnlyAHangIsSeen) {
  ProcessSteps old;
  old.pid = 9;
  old.current_step = 500;
  old.last_step_time = now_;
  std::vector<ProcessSteps> steps{old};
  EXPECT_EQ(detector_.Observe(steps, now_ += absl::Seconds(10)).verdict, AnomalyVerdict::kNone);
  Detection d = detector_.Observe(steps, now_ += absl::Seconds(20));
  ASSERT_EQ(d.verdict, AnomalyVerdict::kAnomaly);
  EXPECT_EQ(d.anomaly.kind, AnomalyKind::kHang);
  EXPECT_EQ(d.anomaly.median, absl::ZeroDuration()) << "unknown";
  EXPECT_EQ(d.anomaly.step_time, absl::Seconds(30));
}

TEST_F(AnomalyDetectorTest, FewerSamplesThanTheMinimumGiveNoMedian) {
  AnomalyParams params = Params();
  params.min_step = 0;
  params.min_samples = 30;
  JobAnomalyDetector detector(params);
  SteppingProcess p(7, 0, now_);
  p.Steady(20, &now_);
  detector.Observe(std::vector<ProcessSteps>{p.steps()}, now_);
  p.Mark(now_ += 10 * kStep);
  EXPECT_EQ(detector.Observe(std::vector<ProcessSteps>{p.steps()}, now_).verdict,
            AnomalyVerdict::kNone);
}

}  // namespace
}  // namespace gpuctl::daemon::scheduler
