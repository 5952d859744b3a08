// The clock probes a fan-out sends before each Trace request: the estimate
// from their samples, and the probing itself against a fake gpuctld on a
// real channel, timed on a fake clock that the fake daemon moves.
#include "cli/clock_probe.h"

#include <vector>

#include "cli/fake_gpuctl_service_test_util.h"
#include "cli/proto_time.h"
#include "daemon/common/testing/fake_clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"

namespace gpuctl::cli {
namespace {

using ::gpuctl::cli::testing::FakeServer;

const absl::Time kT0 = absl::FromUnixSeconds(1704067200);

ClockProbeSample Sample(absl::Duration sent, absl::Duration daemon, absl::Duration received) {
  return {kT0 + sent, kT0 + daemon, kT0 + received};
}

TEST(EstimateCallerClockTest, TakesTheMidpointOfTheFastestRoundTrip) {
  // The daemon is 7ms ahead; each probe's two directions split differently.
  const std::vector<ClockProbeSample> samples = {
      Sample(absl::Milliseconds(0), absl::Milliseconds(7 + 4), absl::Milliseconds(5)),
      Sample(absl::Milliseconds(10), absl::Milliseconds(10 + 7 + 1), absl::Milliseconds(12)),
      Sample(absl::Milliseconds(20), absl::Milliseconds(20 + 7 + 0), absl::Milliseconds(23)),
  };
  const std::optional<v1::CallerClock> clock = EstimateCallerClock(samples);
  ASSERT_TRUE(clock.has_value());
  // The 2ms probe, its midpoint at 11ms: 18ms - 11ms.
  EXPECT_EQ(FromProtoDuration(clock->round_trip()), absl::Milliseconds(2));
  EXPECT_EQ(FromProtoDuration(clock->offset()), absl::Milliseconds(7));
  EXPECT_EQ(clock->probes(), 3u);
  // Within half the round trip of the truth, whatever the split.
  for (const ClockProbeSample& s : samples) {
    const std::optional<v1::CallerClock> one = EstimateCallerClock({&s, 1});
    ASSERT_TRUE(one.has_value());
    EXPECT_LE(absl::AbsDuration(FromProtoDuration(one->offset()) - absl::Milliseconds(7)),
              FromProtoDuration(one->round_trip()) / 2);
  }
}

TEST(EstimateCallerClockTest, ABehindDaemonGivesANegativeOffsetWithNanosOfTheSameSign) {
  const std::vector<ClockProbeSample> samples = {
      Sample(absl::ZeroDuration(), absl::Microseconds(-1500), absl::Microseconds(301)),
  };
  const std::optional<v1::CallerClock> clock = EstimateCallerClock(samples);
  ASSERT_TRUE(clock.has_value());
  // The midpoint is 150.5us after the send.
  EXPECT_EQ(FromProtoDuration(clock->offset()), absl::Nanoseconds(-1'650'500));
  EXPECT_EQ(clock->offset().seconds(), 0);
  EXPECT_LT(clock->offset().nanos(), 0);
  EXPECT_EQ(FromProtoDuration(clock->round_trip()), absl::Microseconds(301));
}

TEST(EstimateCallerClockTest, NoEstimateWithoutAPositiveRoundTrip) {
  EXPECT_FALSE(EstimateCallerClock({}).has_value());
  // A clock that stood still, or stepped back, during the probe.
  const std::vector<ClockProbeSample> bad = {
      Sample(absl::Milliseconds(5), absl::Milliseconds(9), absl::Milliseconds(5)),
      Sample(absl::Milliseconds(5), absl::Milliseconds(9), absl::Milliseconds(4)),
  };
  EXPECT_FALSE(EstimateCallerClock(bad).has_value());
  std::vector<ClockProbeSample> mixed = bad;
  mixed.push_back(Sample(absl::Milliseconds(6), absl::Milliseconds(10), absl::Milliseconds(8)));
  const std::optional<v1::CallerClock> clock = EstimateCallerClock(mixed);
  ASSERT_TRUE(clock.has_value());
  EXPECT_EQ(FromProtoDuration(clock->round_trip()), absl::Milliseconds(2));
  EXPECT_EQ(FromProtoDuration(clock->offset()), absl::Milliseconds(3));
  EXPECT_EQ(clock->probes(), 1u);
}

class ProbeDaemonClockTest : public ::testing::Test {
 protected:
  // The fake daemon, 7ms ahead of the caller, answers each probe after
  // `out` and its answer takes `back`, both on the fake clock.
  void AnswerAfter(const std::vector<std::pair<absl::Duration, absl::Duration>>& delays) {
    host_.service().probe_clock = [this, delays](v1::ProbeClockResponse* response) {
      const auto [out, back] = delays[answered_++ % delays.size()];
      clock_.Advance(out);
      ToProtoTime(clock_.Now() + absl::Milliseconds(7), response->mutable_daemon_time());
      clock_.Advance(back);
      return grpc::Status::OK;
    };
  }

  // An answer 50 µs out and 50 µs back on the fake clock, the daemon's
  // clock the caller's.
  grpc::Status AnswerIn100us(v1::ProbeClockResponse* response) {
    clock_.Advance(absl::Microseconds(50));
    ToProtoTime(clock_.Now(), response->mutable_daemon_time());
    clock_.Advance(absl::Microseconds(50));
    return grpc::Status::OK;
  }

  gpuctl::testing::FakeClock clock_{kT0};
  FakeServer host_;
  std::unique_ptr<v1::Gpuctl::Stub> stub_ =
      v1::Gpuctl::NewStub(grpc::CreateChannel(host_.target(), grpc::InsecureChannelCredentials()));
  size_t answered_ = 0;
};

TEST_F(ProbeDaemonClockTest, KeepsEverySampleAndTheFastestGivesTheEstimate) {
  AnswerAfter({{absl::Milliseconds(3), absl::Milliseconds(1)},
               {absl::Microseconds(100), absl::Microseconds(300)},
               {absl::Milliseconds(1), absl::Milliseconds(1)},
               {absl::Milliseconds(2), absl::Milliseconds(2)}});
  const std::vector<ClockProbeSample> samples =
      ProbeDaemonClock(*stub_, clock_, ClockProbeOptions{}, nullptr);
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0].sent, kT0);
  EXPECT_EQ(samples[0].daemon, kT0 + absl::Milliseconds(3 + 7));
  EXPECT_EQ(samples[0].received, kT0 + absl::Milliseconds(4));
  EXPECT_EQ(samples[1].sent, samples[0].received);
  const std::optional<v1::CallerClock> clock = EstimateCallerClock(samples);
  ASSERT_TRUE(clock.has_value());
  EXPECT_EQ(FromProtoDuration(clock->round_trip()), absl::Microseconds(400));
  // 100us out, 300us back: the midpoint is 100us late, within 200us.
  EXPECT_EQ(FromProtoDuration(clock->offset()), absl::Milliseconds(7) - absl::Microseconds(100));
  EXPECT_EQ(clock->probes(), 4u);
}

TEST_F(ProbeDaemonClockTest, NoProbeStartsPastTheBudgetOrTheDeadline) {
  AnswerAfter({{absl::Milliseconds(8), absl::Milliseconds(7)}});
  // 0-15ms, 15-30ms; the third would start past the 20ms budget.
  EXPECT_EQ(ProbeDaemonClock(*stub_, clock_, ClockProbeOptions{}, nullptr).size(), 2u);
  EXPECT_EQ(host_.service().probes(), 2);
  // The host's deadline comes first: one probe, whatever its length.
  ClockProbeOptions options;
  options.deadline = clock_.Now() + absl::Milliseconds(10);
  EXPECT_EQ(ProbeDaemonClock(*stub_, clock_, options, nullptr).size(), 1u);
  EXPECT_EQ(host_.service().probes(), 3);
  // Already past it: none.
  options.deadline = clock_.Now();
  EXPECT_TRUE(ProbeDaemonClock(*stub_, clock_, options, nullptr).empty());
  EXPECT_EQ(host_.service().probes(), 3);
}

TEST_F(ProbeDaemonClockTest, AnOlderDaemonOrAFailureEndsTheProbing) {
  // No ProbeClock: UNIMPLEMENTED, and no second try.
  EXPECT_TRUE(ProbeDaemonClock(*stub_, clock_, ClockProbeOptions{}, nullptr).empty());
  EXPECT_EQ(host_.service().probes(), 1);
  // A failure after a sample keeps the sample.
  host_.service().probe_clock = [this](v1::ProbeClockResponse* response) {
    if (answered_++ > 0) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "going away");
    return AnswerIn100us(response);
  };
  const std::vector<ClockProbeSample> samples =
      ProbeDaemonClock(*stub_, clock_, ClockProbeOptions{}, nullptr);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].received - samples[0].sent, absl::Microseconds(100));
  EXPECT_EQ(host_.service().probes(), 3);
}

// A later probe slower than four times the fastest so far (at least 1 ms)
// is given up: it could not tighten the bound.
TEST_F(ProbeDaemonClockTest, ALaterProbeFarSlowerThanTheFastestIsGivenUp) {
  host_.service().probe_clock = [this](v1::ProbeClockResponse* response) {
    // On gRPC's clock, which times the calls: the second answer is late.
    if (answered_++ == 1) absl::SleepFor(absl::Milliseconds(300));
    return AnswerIn100us(response);
  };
  const std::vector<ClockProbeSample> samples =
      ProbeDaemonClock(*stub_, clock_, ClockProbeOptions{}, nullptr);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].received - samples[0].sent, absl::Microseconds(100));
  EXPECT_EQ(host_.service().probes(), 2);
}

TEST_F(ProbeDaemonClockTest, AnAnswerWithoutATimeEndsTheProbing) {
  host_.service().probe_clock = [](v1::ProbeClockResponse*) { return grpc::Status::OK; };
  EXPECT_TRUE(ProbeDaemonClock(*stub_, clock_, ClockProbeOptions{}, nullptr).empty());
  EXPECT_EQ(host_.service().probes(), 1);
}

TEST_F(ProbeDaemonClockTest, ACancelledCommandSendsNone) {
  AnswerAfter({{absl::Microseconds(50), absl::Microseconds(50)}});
  CancelGroup cancel(nullptr);
  cancel.Cancel();
  EXPECT_TRUE(ProbeDaemonClock(*stub_, clock_, ClockProbeOptions{}, &cancel).empty());
  EXPECT_EQ(host_.service().probes(), 0);
}

}  // namespace
}  // namespace gpuctl::cli
