// Iteration windows: the session watching for a step, opened and closed by
// step marks on the marking thread, the bound, and the same with real
// threads stepping while another plays the agent thread.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "client_lib/src/capture_session.h"
#include "client_lib/src/capture_session_fakes_for_test.h"
#include "client_lib/src/host_source.h"
#include "client_lib/src/payload_decoder_for_test.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::client {
namespace {

using testing::DecodePayload;
using testing::FakeClock;
using testing::FakeSource;
using testing::RecordingOutput;
using testing::StatusOf;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSecond = 1'000'000'000;
constexpr uint16_t kStep = static_cast<uint16_t>(records::Kind::kStep);

class IterationWindowTest : public ::testing::Test {
 protected:
  wire::StartCapture Request(uint64_t start_step, uint32_t iterations,
                             int64_t bound_ns = 60 * kSecond) {
    wire::StartCapture s;
    s.trace_id = "steps";
    s.start_time_unix_ns = clock_.now;
    s.duration_ns = bound_ns;
    s.start_step = start_step;
    s.iterations = iterations;
    return s;
  }
  // What the API's step slow path does with the session.
  void Mark(uint64_t step, int64_t at) {
    clock_.now = at;
    MarkStepN(state_, step, at);
    if ((state_.gate.load() & kGateStepWatch) != 0) session_.OnStepMarked(step, at);
  }
  bool Watching() const { return (state_.gate.load() & kGateStepWatch) != 0; }

  FakeClock clock_;
  RecordingOutput out_;
  FakeSource source_;
  AnnotationState state_;
  CaptureSession session_{&clock_, &state_, {&source_}, &out_};
};

TEST_F(IterationWindowTest, OpensAtTheStartStepMarkAndClosesAtTheMarkAfterTheLast) {
  MarkStepN(state_, 7, clock_.now);
  const wire::StartCapture request = Request(10, 3);
  ASSERT_TRUE(session_.OnStartCapture(request));
  EXPECT_TRUE(Watching());
  EXPECT_EQ(source_.prepares, 1);
  EXPECT_EQ(source_.started_at, 0);
  EXPECT_EQ(session_.DeadlineNs(), request.start_time_unix_ns + request.duration_ns);

  const int64_t t0 = clock_.now;
  Mark(8, t0 + 1 * kMs);
  Mark(9, t0 + 2 * kMs);
  EXPECT_EQ(source_.started_at, 0);
  EXPECT_EQ(out_.wakes, 0);

  // Opened synchronously on the marking thread; nothing sent from it.
  Mark(10, t0 + 3 * kMs);
  EXPECT_EQ(source_.started_at, t0 + 3 * kMs);
  EXPECT_TRUE(out_.started.empty());
  EXPECT_EQ(out_.wakes, 1);
  EXPECT_LE(*session_.DeadlineNs(), clock_.now);  // due: the agent sends CaptureStarted
  ASSERT_TRUE(session_.OnTimer());
  ASSERT_EQ(out_.started.size(), 1u);
  EXPECT_EQ(out_.started[0].first_step, 10u);
  EXPECT_EQ(out_.started[0].opened_at_unix_ns, t0 + 3 * kMs);
  EXPECT_FALSE(out_.started[0].late_start);

  Mark(11, t0 + 4 * kMs);
  Mark(12, t0 + 5 * kMs);
  EXPECT_EQ(source_.recording_stopped_at, 0);
  Mark(13, t0 + 6 * kMs);
  EXPECT_EQ(source_.recording_stopped_at, t0 + 6 * kMs);
  EXPECT_FALSE(Watching());
  EXPECT_EQ(out_.wakes, 2);
  EXPECT_TRUE(out_.results.empty());  // the agent thread finishes

  clock_.now = t0 + 7 * kMs;
  ASSERT_TRUE(session_.OnTimer());
  ASSERT_EQ(out_.results.size(), 1u);
  const wire::CaptureResult& r = out_.results[0];
  EXPECT_EQ(StatusOf(r), wire::CaptureStatus::kOk);
  EXPECT_EQ(r.message, "");
  EXPECT_EQ(r.first_step, 10u);
  EXPECT_EQ(r.steps, 3u);
  EXPECT_EQ(r.window_start_unix_ns, t0 + 3 * kMs);
  EXPECT_EQ(r.window_end_unix_ns, t0 + 6 * kMs);  // the closing mark, not the agent's wake-up
  EXPECT_EQ(source_.stopped_at, t0 + 6 * kMs);
  std::optional<testing::DecodedPayload> p = DecodePayload(out_.payloads[0]);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->window_start_ns, t0 + 3 * kMs);
  EXPECT_EQ(p->window_end_ns, t0 + 6 * kMs);
  EXPECT_TRUE(session_.idle());
  EXPECT_EQ(session_.DeadlineNs(), std::nullopt);
  Mark(14, t0 + 8 * kMs);  // after the end: ignored
  EXPECT_EQ(out_.wakes, 2);
}

TEST_F(IterationWindowTest, OpenedAndClosedBeforeTheAgentWakesSendsStartedThenResult) {
  ASSERT_TRUE(session_.OnStartCapture(Request(0, 1)));
  Mark(0, clock_.now + 1);
  Mark(1, clock_.now + 1);
  ASSERT_TRUE(session_.OnTimer());
  ASSERT_EQ(out_.started.size(), 1u);
  ASSERT_EQ(out_.results.size(), 1u);
  EXPECT_EQ(out_.results[0].first_step, 0u);
  EXPECT_EQ(out_.results[0].steps, 1u);
}

TEST_F(IterationWindowTest, AStepInsideTheRangeOpensWhenTheStartStepWasSkipped) {
  MarkStepN(state_, 5, clock_.now);
  ASSERT_TRUE(session_.OnStartCapture(Request(10, 4)));
  Mark(12, clock_.now + kMs);  // gpuctl_step_n numbering jumped over 10 and 11
  Mark(14, clock_.now + kMs);
  ASSERT_TRUE(session_.OnTimer());
  ASSERT_EQ(out_.results.size(), 1u);
  EXPECT_EQ(out_.started[0].first_step, 12u);
  EXPECT_EQ(out_.results[0].first_step, 12u);
  EXPECT_EQ(out_.results[0].steps, 2u);
}

TEST_F(IterationWindowTest, AProcessAlreadyAtOrPastTheStartStepFailsAtOnce) {
  MarkStepN(state_, 10, clock_.now);
  ASSERT_TRUE(session_.OnStartCapture(Request(10, 3)));
  ASSERT_EQ(out_.results.size(), 1u);
  EXPECT_EQ(StatusOf(out_.results[0]), wire::CaptureStatus::kFailed);
  EXPECT_EQ(out_.results[0].message, "already at step 10, past the start step 10");
  EXPECT_FALSE(Watching());
  EXPECT_EQ(source_.aborts, 1);
  EXPECT_TRUE(session_.idle());
}

TEST_F(IterationWindowTest, NoStepMarkedYetCanStillWatchForStepZero) {
  ASSERT_TRUE(session_.OnStartCapture(Request(0, 2)));
  EXPECT_TRUE(Watching());
  EXPECT_TRUE(out_.results.empty());
}

TEST_F(IterationWindowTest, NeverReachingTheStartStepTimesOutAtTheBound) {
  MarkStepN(state_, 3, clock_.now);
  const wire::StartCapture request = Request(100, 2, 2 * kSecond);
  ASSERT_TRUE(session_.OnStartCapture(request));
  Mark(4, clock_.now + kSecond);
  clock_.now = request.start_time_unix_ns + 2 * kSecond - 1;
  ASSERT_TRUE(session_.OnTimer());
  EXPECT_TRUE(out_.results.empty());
  clock_.now += 1;
  ASSERT_TRUE(session_.OnTimer());
  ASSERT_EQ(out_.results.size(), 1u);
  const wire::CaptureResult& r = out_.results[0];
  EXPECT_EQ(StatusOf(r), wire::CaptureStatus::kTimedOut);
  EXPECT_EQ(r.message, "did not reach step 100 within 2s (last step 4)");
  EXPECT_EQ(out_.payloads[0], "");
  EXPECT_TRUE(out_.started.empty());
  EXPECT_FALSE(Watching());
  EXPECT_EQ(source_.aborts, 1);
  EXPECT_TRUE(session_.idle());
}

TEST_F(IterationWindowTest, TimeoutWithoutAnyStepSaysSo) {
  const wire::StartCapture request = Request(5, 1, 250 * kMs);
  ASSERT_TRUE(session_.OnStartCapture(request));
  clock_.now += 250 * kMs;
  ASSERT_TRUE(session_.OnTimer());
  ASSERT_EQ(out_.results.size(), 1u);
  EXPECT_EQ(out_.results[0].message, "did not reach step 5 within 250ms (no step marked)");
}

TEST_F(IterationWindowTest, TheBoundClosesAnOpenWindowWithTheStepsCovered) {
  MarkStepN(state_, 8, clock_.now);
  const wire::StartCapture request = Request(10, 5, kSecond);
  ASSERT_TRUE(session_.OnStartCapture(request));
  Mark(10, clock_.now + 100 * kMs);
  Mark(11, clock_.now + 100 * kMs);
  ASSERT_TRUE(session_.OnTimer());  // CaptureStarted
  const int64_t bound = request.start_time_unix_ns + kSecond;
  EXPECT_EQ(session_.DeadlineNs(), bound);
  clock_.now = bound;
  ASSERT_TRUE(session_.OnTimer());
  ASSERT_EQ(out_.results.size(), 1u);
  const wire::CaptureResult& r = out_.results[0];
  EXPECT_EQ(StatusOf(r), wire::CaptureStatus::kOk);
  EXPECT_EQ(r.first_step, 10u);
  EXPECT_EQ(r.steps, 2u);
  EXPECT_EQ(r.message, "captured steps 10-11 of 10-14 before the bound");
  EXPECT_EQ(r.window_end_unix_ns, bound);
  EXPECT_EQ(source_.stopped_at, bound);
  EXPECT_FALSE(out_.payloads[0].empty());
  EXPECT_FALSE(Watching());
}

TEST_F(IterationWindowTest, AStepNumberedPastTheWholeWindowFailsIt) {
  ASSERT_TRUE(session_.OnStartCapture(Request(10, 3)));
  Mark(20, clock_.now + kMs);
  EXPECT_FALSE(Watching());
  EXPECT_EQ(out_.wakes, 1);
  EXPECT_TRUE(out_.results.empty());
  ASSERT_TRUE(session_.OnTimer());
  ASSERT_EQ(out_.results.size(), 1u);
  EXPECT_EQ(StatusOf(out_.results[0]), wire::CaptureStatus::kFailed);
  EXPECT_EQ(out_.results[0].message, "step 20 was marked before any of steps 10-12");
  EXPECT_EQ(source_.started_at, 0);
  EXPECT_EQ(source_.aborts, 1);
}

TEST_F(IterationWindowTest, CancelWhileWatchingLowersTheGate) {
  ASSERT_TRUE(session_.OnStartCapture(Request(10, 3)));
  ASSERT_TRUE(session_.OnCancelCapture(wire::CancelCapture{"steps", "operator"}));
  EXPECT_FALSE(Watching());
  ASSERT_EQ(out_.results.size(), 1u);
  EXPECT_EQ(out_.results[0].message, "cancelled: operator");
  Mark(10, clock_.now + 1);
  EXPECT_EQ(source_.started_at, 0);
}

TEST_F(IterationWindowTest, SecondRequestWhileWatchingIsBusy) {
  ASSERT_TRUE(session_.OnStartCapture(Request(10, 3)));
  wire::StartCapture other = Request(20, 1);
  other.trace_id = "other";
  ASSERT_TRUE(session_.OnStartCapture(other));
  ASSERT_EQ(out_.results.size(), 1u);
  EXPECT_EQ(StatusOf(out_.results[0]), wire::CaptureStatus::kBusy);
  EXPECT_TRUE(Watching());
}

TEST_F(IterationWindowTest, StepNumberOverflowIsRejected) {
  ASSERT_TRUE(session_.OnStartCapture(Request(UINT64_MAX - 1, 2)));
  ASSERT_EQ(out_.results.size(), 1u);
  EXPECT_EQ(StatusOf(out_.results[0]), wire::CaptureStatus::kRejected);
  EXPECT_FALSE(Watching());
}

TEST_F(IterationWindowTest, AbortLowersTheGateAndStepsAreIgnoredByTimeWindows) {
  ASSERT_TRUE(session_.OnStartCapture(Request(10, 3)));
  session_.Abort();
  EXPECT_FALSE(Watching());
  EXPECT_TRUE(session_.idle());
  wire::StartCapture timed = Request(0, 0, kSecond);
  ASSERT_TRUE(session_.OnStartCapture(timed));
  EXPECT_FALSE(Watching());
  session_.OnStepMarked(1'000'000, clock_.now);  // a stray mark: nothing happens
  EXPECT_EQ(out_.wakes, 0);
}

// Real threads: one marks steps as gpuctl_step does (and annotates), one
// plays the agent thread, woken by the session or polling its deadline.
TEST(IterationWindowThreadsTest, StepsOnAnApplicationThreadBoundTheRecordedWindow) {
  RealClock clock;
  AnnotationState state;
  HostSource host(&state, &clock);
  RecordingOutput out;
  CaptureSession session(&clock, &state, {&host}, &out);
  std::atomic<bool> stop{false};
  // Until the request is made the stepper does not mark step `hold` or
  // later (it spins, `held` raised): however the threads are scheduled, the
  // start step is still ahead when the request arrives.
  std::atomic<uint64_t> hold{UINT64_MAX};
  std::atomic<bool> held{false};
  std::atomic<bool> requested{false};

  std::thread stepper([&] {
    while (!stop.load()) {
      uint64_t last = 0;
      if (!requested.load() && LastMarkedStep(state, &last) && last + 1 >= hold.load()) {
        held.store(true);
        std::this_thread::yield();
        continue;
      }
      const int64_t now = clock.RealtimeNs();
      const uint64_t step = MarkStep(state, now);
      if (state.gate.load(std::memory_order_relaxed) != 0) {
        if ((state.gate.load(std::memory_order_relaxed) & kGateStepWatch) != 0) {
          session.OnStepMarked(step, now);
        }
        host.RecordStep(step, now);
      }
      host.Push("step.work");
      const int64_t until = clock.MonotonicNs() + 200'000;  // the step's work
      while (clock.MonotonicNs() < until) {
      }
      host.Pop();
    }
  });
  uint64_t current = 0;
  while (!LastMarkedStep(state, &current)) std::this_thread::yield();
  hold.store(0);  // pause the stepper, then read where it stopped
  while (!held.load()) std::this_thread::yield();
  ASSERT_TRUE(LastMarkedStep(state, &current));
  const uint64_t start_step = current + 20;
  held.store(false);
  hold.store(start_step);  // on to the step before the start step

  wire::StartCapture request;
  request.trace_id = "threads";
  request.start_time_unix_ns = clock.RealtimeNs();
  request.duration_ns = 60 * kSecond;
  request.start_step = start_step;
  request.iterations = 3;
  std::thread agent([&] {
    ASSERT_TRUE(session.OnStartCapture(request));
    requested.store(true);
    std::unique_lock lock(out.mu);
    while (out.results.empty() && !stop.load()) {
      const int seen = out.wakes;
      out.cv.wait_for(lock, std::chrono::milliseconds(5), [&] { return out.wakes != seen; });
      lock.unlock();
      ASSERT_TRUE(session.OnTimer());
      lock.lock();
    }
  });
  {
    std::unique_lock lock(out.mu);
    EXPECT_TRUE(
        out.cv.wait_for(lock, std::chrono::seconds(60), [&] { return !out.results.empty(); }));
  }
  stop.store(true);
  agent.join();
  stepper.join();

  ASSERT_EQ(out.started.size(), 1u);
  EXPECT_EQ(out.started[0].first_step, start_step);
  ASSERT_EQ(out.results.size(), 1u);
  const wire::CaptureResult& r = out.results[0];
  ASSERT_EQ(StatusOf(r), wire::CaptureStatus::kOk) << r.message;
  EXPECT_EQ(r.first_step, start_step);
  EXPECT_EQ(r.steps, 3u);
  std::optional<testing::DecodedPayload> p = DecodePayload(out.payloads[0]);
  ASSERT_TRUE(p.has_value());
  std::vector<uint64_t> marks;
  for (const testing::DecodedEvent& e : p->OfKind(kStep)) {
    marks.push_back(e.step);
    EXPECT_GE(e.start_ns, r.window_start_unix_ns);
    EXPECT_LT(e.start_ns, r.window_end_unix_ns);
  }
  // Exactly the window's steps: the opening mark is in, the closing one out.
  EXPECT_EQ(marks, (std::vector<uint64_t>{start_step, start_step + 1, start_step + 2}));
  EXPECT_EQ(p->Ranges("step.work").size(), 3u);
  EXPECT_EQ(state.gate.load(), 0u);
}

}  // namespace
}  // namespace gpuctl::client
