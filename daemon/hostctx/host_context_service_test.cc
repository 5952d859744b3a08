#include "daemon/hostctx/host_context_service.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "daemon/common/clock.h"
#include "daemon/common/mutex.h"
#include "daemon/hostctx/testing/no_frame_pointer_workload.h"
#include "daemon/hostctx/testing/spin_workload.h"
#include "gtest/gtest.h"

namespace gpuctl::hostctx {
namespace {

struct Outcome {
  v1::HostContextResult summary;
  std::shared_ptr<const WindowEvents> events;
};

// Finishes `key` and waits (at most 30 s) for the service's answer, which
// comes on another thread.
Outcome FinishAndWait(HostContextService* service, uint64_t key) {
  struct Shared {
    Mutex mu;
    CondVar cv;
    bool done ABSL_GUARDED_BY(mu) = false;
    Outcome outcome ABSL_GUARDED_BY(mu);
  };
  auto shared = std::make_shared<Shared>();
  service->Finish(
      key, [shared](v1::HostContextResult summary, std::shared_ptr<const WindowEvents> events) {
        MutexLock lock(&shared->mu);
        shared->outcome = {std::move(summary), std::move(events)};
        shared->done = true;
        shared->cv.SignalAll();
      });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  MutexLock lock(&shared->mu);
  while (!shared->done && shared->cv.WaitUntil(&shared->mu, deadline)) {
  }
  EXPECT_TRUE(shared->done);
  return shared->outcome;
}

std::unique_ptr<HostContextService> MakeService(RealClock* clock, size_t max_recordings = 256) {
  HostContextServiceOptions options;
  options.recorder.sampler.frequency_hz = 499;
  options.max_recordings = max_recordings;
  auto service = HostContextService::Create(options, clock);
  EXPECT_TRUE(service.ok()) << service.status();
  return std::move(*service);
}

TEST(HostContextServiceTest, RecordsAProcessOnItsOwnThreadsAndSymbolizesIt) {
  const pid_t child = fork();
  if (child == 0) {
    GpuctlHostctxSpinUntil(testing::MonotonicNowNs() + 20'000'000'000);
    _exit(0);
  }
  RealClock clock;
  std::unique_ptr<HostContextService> service = MakeService(&clock);
  const int64_t start = absl::ToUnixNanos(absl::Now());
  service->Start(7, child, /*samples=*/true, /*switches=*/true);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  Outcome outcome = FinishAndWait(service.get(), 7);
  const int64_t end = absl::ToUnixNanos(absl::Now());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  if (outcome.summary.state() == v1::HostContextResult::STATE_UNAVAILABLE &&
      outcome.summary.reason().find("Permission denied") != std::string::npos) {
    GTEST_SKIP() << outcome.summary.reason();
  }
  ASSERT_EQ(outcome.summary.state(), v1::HostContextResult::STATE_RECORDED)
      << outcome.summary.reason();
  ASSERT_NE(outcome.events, nullptr);
  EXPECT_EQ(outcome.summary.processes(), 1u);
  int spin = 0;
  WindowEvents::Written written =
      outcome.events->Write(start, start, end, [&](absl::string_view event) {
        spin += event.find("\"name\":\"GpuctlHostctxSpin") != absl::string_view::npos;
      });
  EXPECT_GT(written.samples, 10u);
  EXPECT_GT(spin, 10);
  // A key finishes once.
  EXPECT_EQ(FinishAndWait(service.get(), 7).summary.state(),
            v1::HostContextResult::STATE_UNAVAILABLE);
}

// A recording asked to unwind with DWARF turns each sample's stack copy
// into its chain: code built without frame pointers shows its callers in
// the events, and the summary says how many samples were unwound.
TEST(HostContextServiceTest, DwarfRecordingsShowCallersOfCodeWithoutFramePointers) {
  const pid_t child = fork();
  if (child == 0) {
    GpuctlHostctxNoFpOuter(testing::MonotonicNowNs() + 20'000'000'000);
    _exit(0);
  }
  RealClock clock;
  std::unique_ptr<HostContextService> service = MakeService(&clock);
  const int64_t start = absl::ToUnixNanos(absl::Now());
  service->Start(3, child, /*samples=*/true, /*switches=*/false, /*dwarf=*/true);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  Outcome outcome = FinishAndWait(service.get(), 3);
  const int64_t end = absl::ToUnixNanos(absl::Now());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  if (outcome.summary.state() == v1::HostContextResult::STATE_UNAVAILABLE &&
      outcome.summary.reason().find("Permission denied") != std::string::npos) {
    GTEST_SKIP() << outcome.summary.reason();
  }
  ASSERT_EQ(outcome.summary.state(), v1::HostContextResult::STATE_RECORDED)
      << outcome.summary.reason();
  EXPECT_EQ(outcome.summary.unwind(), v1::HOST_UNWIND_DWARF);
  EXPECT_GT(outcome.summary.dwarf_unwound(), 10u);
  EXPECT_EQ(outcome.summary.stacks_dropped(), 0u);
  int through_outer = 0;
  outcome.events->Write(start, start, end, [&](absl::string_view event) {
    const size_t inner = event.find("\"GpuctlHostctxNoFpInner\"");
    const size_t middle = event.find("\"GpuctlHostctxNoFpMiddle\"");
    const size_t outer = event.find("\"GpuctlHostctxNoFpOuter\"");
    through_outer += inner != absl::string_view::npos && middle != absl::string_view::npos &&
                     outer != absl::string_view::npos && inner < middle && middle < outer;
  });
  EXPECT_GT(through_outer, 10);
}

TEST(HostContextServiceTest, AProcessThatCannotBeRecordedIsUnavailableWithTheReason) {
  RealClock clock;
  std::unique_ptr<HostContextService> service = MakeService(&clock);
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  service->Start(1, gone, true, true);
  Outcome outcome = FinishAndWait(service.get(), 1);
  EXPECT_EQ(outcome.summary.state(), v1::HostContextResult::STATE_UNAVAILABLE);
  EXPECT_FALSE(outcome.summary.reason().empty());
  EXPECT_EQ(outcome.events, nullptr);
}

TEST(HostContextServiceTest, RecordingsBeyondTheCapAreUnavailable) {
  RealClock clock;
  std::unique_ptr<HostContextService> service = MakeService(&clock, /*max_recordings=*/0);
  service->Start(1, getpid(), true, true);
  Outcome outcome = FinishAndWait(service.get(), 1);
  EXPECT_EQ(outcome.summary.state(), v1::HostContextResult::STATE_UNAVAILABLE);
  EXPECT_EQ(outcome.summary.reason(), "more than 0 processes recorded at once");
}

TEST(HostContextServiceTest, ShutdownClosesOpenRecordings) {
  RealClock clock;
  std::unique_ptr<HostContextService> service = MakeService(&clock);
  service->Start(1, getpid(), true, true);
  service->Shutdown();
  service->Shutdown();
}

}  // namespace
}  // namespace gpuctl::hostctx
