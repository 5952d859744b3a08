// RunTraceFanout's deadlines on an injected clock: a fake gpuctld on a real
// channel, while the test moves a FakeClock past host_timeout and the
// result_margin watchdog.
#include "cli/trace_fanout.h"

#include <atomic>
#include <memory>
#include <sstream>
#include <thread>

#include "cli/duration.h"
#include "cli/fake_gpuctl_service_test_util.h"
#include "cli/proto_time.h"
#include "daemon/common/testing/fake_clock.h"
#include "daemon/common/testing/observed_task_runner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::cli {
namespace {

using ::gpuctl::cli::testing::FakeGpuctlService;
using ::gpuctl::cli::testing::FakeProcess;
using ::gpuctl::cli::testing::FakeServer;
using ::gpuctl::cli::testing::WaitFor;
using ::testing::HasSubstr;

constexpr absl::Duration kTick = absl::Milliseconds(1);

// Holds the stream open until the caller cancels it; with `start`, after a
// TraceStarted whose window is already over.
FakeGpuctlService::TraceFn HoldUntilCancelled(FakeGpuctlService& service, bool start) {
  return [&service, start](grpc::ServerContext* context, const v1::TraceRequest& request,
                           grpc::ServerWriter<v1::TraceEvent>* writer) {
    if (start) {
      v1::TraceEvent started;
      v1::TraceStarted* s = started.mutable_started();
      s->set_trace_id(request.trace_id());
      s->set_host("node1");
      s->mutable_start_time()->set_seconds(1000);
      s->mutable_end_time()->set_seconds(1000);
      s->mutable_received_at()->set_seconds(1000);
      *s->add_processes() = FakeProcess(100, 0);
      writer->Write(started);
    }
    if (WaitFor([&] { return context->IsCancelled(); })) service.NoteCancelled();
    return grpc::Status::CANCELLED;
  };
}

class TraceFanoutClockTest : public ::testing::Test {
 protected:
  TraceFanoutClockTest() {
    options_.request.set_trace_id("0190d3c4-0000-7000-8000-000000000001");
    options_.host_timeout = absl::Seconds(10);
    options_.result_margin = absl::Seconds(60);
  }
  ~TraceFanoutClockTest() override {
    if (run_.joinable()) run_.join();
  }

  // Runs the fan-out to the fake host on a thread of its own.
  void Start() {
    run_ = std::thread([this] {
      std::ostringstream err;
      std::unique_ptr<TraceProgress> progress = MakePlainProgress(err, {host_.target()});
      TraceFanoutDeps deps;
      deps.clock = &clock_;
      deps.timers = &timers_;
      result_ = RunTraceFanout({HostEntry{host_.target(), ""}}, options_, nullptr, *progress, deps);
      finished_ = true;
    });
  }
  HostTrace Finish() {
    run_.join();
    EXPECT_EQ(result_.hosts.size(), 1u);
    return result_.hosts.empty() ? HostTrace() : result_.hosts[0];
  }

  gpuctl::testing::FakeClock clock_;
  gpuctl::testing::ObservedTaskRunner timers_{&clock_};
  FakeServer host_;
  TraceFanoutOptions options_;
  std::thread run_;
  std::atomic<bool> finished_{false};
  TraceFanoutResult result_;  // written before finished_
};

TEST_F(TraceFanoutClockTest, AHostThatDoesNotStartIsGivenUpAtHostTimeout) {
  host_.service().trace = HoldUntilCancelled(host_.service(), /*start=*/false);
  const absl::Time deadline = clock_.Now() + options_.host_timeout;
  Start();
  ASSERT_TRUE(timers_.RunUntilTimerArmedAt(deadline));
  // The request is there before time moves: on a loaded machine the
  // connection may take longer than the test's clock steps.
  ASSERT_TRUE(WaitFor([&] { return host_.service().trace_requests().size() == 1; }));
  timers_.fake().AdvanceBy(options_.host_timeout - kTick);
  EXPECT_FALSE(finished_);
  EXPECT_EQ(host_.service().cancelled(), 0);

  timers_.fake().AdvanceBy(kTick);
  HostTrace trace = Finish();
  EXPECT_EQ(trace.status, HostStatus::kTimedOut);
  EXPECT_THAT(trace.error, HasSubstr(absl::StrCat("did not start the trace within ",
                                                  FormatUserDuration(options_.host_timeout))));
  EXPECT_TRUE(WaitFor([&] { return host_.service().cancelled() == 1; }));
  // caller_time is read on the injected clock.
  ASSERT_EQ(host_.service().trace_requests().size(), 1u);
  EXPECT_EQ(host_.service().trace_requests()[0].caller_time().seconds(),
            absl::ToUnixSeconds(gpuctl::testing::FakeClock::DefaultStart()));
  // The fake gpuctld has no ProbeClock, as one older than the call: one
  // probe, and the request goes with caller_time alone.
  EXPECT_EQ(host_.service().probes(), 1);
  EXPECT_FALSE(host_.service().trace_requests()[0].has_caller_clock());
}

// The probes run on the request's connection right before it, on the
// injected clock; the fastest one's midpoint goes with the request.
TEST_F(TraceFanoutClockTest, TheRequestCarriesTheFastestProbesMidpoint) {
  host_.service().trace = HoldUntilCancelled(host_.service(), /*start=*/true);
  int answered = 0;
  // The daemon is 5ms behind; round trips of 900us, 300us, 600us, 1.2ms.
  const std::vector<std::pair<absl::Duration, absl::Duration>> delays = {
      {absl::Microseconds(450), absl::Microseconds(450)},
      {absl::Microseconds(200), absl::Microseconds(100)},
      {absl::Microseconds(300), absl::Microseconds(300)},
      {absl::Microseconds(600), absl::Microseconds(600)}};
  host_.service().probe_clock = [&](v1::ProbeClockResponse* response) {
    const auto [out, back] = delays[answered++ % delays.size()];
    clock_.Advance(out);
    ToProtoTime(clock_.Now() - absl::Milliseconds(5), response->mutable_daemon_time());
    clock_.Advance(back);
    return grpc::Status::OK;
  };
  options_.host_timeout = absl::Hours(1);
  const absl::Time watchdog = clock_.Now() + absl::Microseconds(3000) + options_.result_margin;
  Start();
  ASSERT_TRUE(timers_.RunUntilTimerArmedAt(watchdog));
  ASSERT_EQ(host_.service().trace_requests().size(), 1u);
  const v1::TraceRequest request = host_.service().trace_requests()[0];
  EXPECT_EQ(host_.service().probes(), 4);
  ASSERT_TRUE(request.has_caller_clock());
  EXPECT_EQ(request.caller_clock().round_trip().nanos(), 300'000);
  // 200us out, 100us back: the midpoint is 50us late, well within 150us.
  EXPECT_EQ(request.caller_clock().offset().nanos(), -5'000'000 + 50'000);
  EXPECT_EQ(request.caller_clock().probes(), 4u);
  // caller_time is read after the probes.
  EXPECT_EQ(FromProtoTime(request.caller_time()),
            gpuctl::testing::FakeClock::DefaultStart() + absl::Microseconds(3000));
  timers_.fake().AdvanceBy(options_.result_margin);
  EXPECT_EQ(Finish().status, HostStatus::kTimedOut);
}

TEST_F(TraceFanoutClockTest, AHostSilentAfterItsWindowIsGivenUpAtTheMargin) {
  host_.service().trace = HoldUntilCancelled(host_.service(), /*start=*/true);
  // Past the margin: the dispatch's wake-up does not come due first.
  options_.host_timeout = absl::Hours(1);
  // The window is over when it starts: the watchdog is the margin from now.
  const absl::Time watchdog = clock_.Now() + options_.result_margin;
  Start();
  ASSERT_TRUE(timers_.RunUntilTimerArmedAt(watchdog));
  timers_.fake().AdvanceBy(options_.result_margin - kTick);
  EXPECT_FALSE(finished_);
  EXPECT_EQ(host_.service().cancelled(), 0);

  timers_.fake().AdvanceBy(kTick);
  HostTrace trace = Finish();
  EXPECT_EQ(trace.status, HostStatus::kTimedOut);
  EXPECT_THAT(trace.error, HasSubstr(absl::StrCat("no progress for ",
                                                  FormatUserDuration(options_.result_margin))));
  EXPECT_TRUE(WaitFor([&] { return host_.service().cancelled() == 1; }));
}

}  // namespace
}  // namespace gpuctl::cli
