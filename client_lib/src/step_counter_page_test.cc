// The step counter: marks and the moving period, and the shared page as the
// daemon sees it (a sealed memfd mapped read-only elsewhere).
#include "client_lib/src/step_counter_page.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace gpuctl::client {
namespace {

// The page read the way gpuctld reads it: its own read-only mapping of the
// descriptor, fields at the offsets of step_page.h.
class DaemonView {
 public:
  explicit DaemonView(int fd)
      : page_(mmap(nullptr, steps::kStepPageBytes, PROT_READ, MAP_SHARED, fd, 0)) {}
  ~DaemonView() {
    if (ok()) munmap(page_, steps::kStepPageBytes);
  }
  bool ok() const { return page_ != MAP_FAILED; }
  template <typename T>
  T At(uint32_t offset) const {
    T value;
    std::memcpy(&value, static_cast<const char*>(page_) + offset, sizeof(T));
    return value;
  }

 private:
  void* page_;
};

TEST(StepCountersTest, MarksCountAndTheirPeriodIsAMovingMean) {
  AnnotationState state;
  uint64_t last = 0;
  EXPECT_FALSE(LastMarkedStep(state, &last));
  EXPECT_EQ(MarkStep(state, 1'000), 0u);
  EXPECT_EQ(state.private_counters.period_ns.load(), 0);  // one mark: no interval
  EXPECT_EQ(MarkStep(state, 1'800), 1u);
  EXPECT_EQ(state.private_counters.period_ns.load(), 800);
  EXPECT_EQ(MarkStep(state, 3'400), 2u);  // interval 1600: 800 + 800/8
  EXPECT_EQ(state.private_counters.period_ns.load(), 900);
  MarkStepN(state, 500, 3'500);  // interval 100: 900 - 800/8
  EXPECT_EQ(state.private_counters.period_ns.load(), 800);
  EXPECT_EQ(state.private_counters.last_step_unix_ns.load(), 3'500);
  ASSERT_TRUE(LastMarkedStep(state, &last));
  EXPECT_EQ(last, 500u);
  EXPECT_EQ(MarkStep(state, 3'400), 501u);  // the clock went back: period kept
  EXPECT_EQ(state.private_counters.period_ns.load(), 800);
}

TEST(StepCountersTest, EachIntervalGoesToTheRingOfRecentDurations) {
  AnnotationState state;
  const StepCounters& c = state.private_counters;
  MarkStep(state, 1'000);
  EXPECT_EQ(c.durations_written.load(), 0u);  // one mark: no interval yet
  MarkStep(state, 1'800);
  MarkStep(state, 3'400);
  EXPECT_EQ(c.durations_written.load(), 2u);
  EXPECT_EQ(c.durations[0].load(), 800);
  EXPECT_EQ(c.durations[1].load(), 1'600);
  MarkStep(state, 3'000);  // the clock went back: no interval
  EXPECT_EQ(c.durations_written.load(), 2u);
  // The ring wraps: the newest kStepRingSize intervals are kept.
  int64_t t = 3'000;
  for (uint32_t i = 0; i < steps::kStepRingSize; ++i) MarkStep(state, t += 10 + i);
  EXPECT_EQ(c.durations_written.load(), 2u + steps::kStepRingSize);
  EXPECT_EQ(c.durations[1].load(), 10 + steps::kStepRingSize - 1) << "the newest";
  EXPECT_EQ(c.durations[2].load(), 10) << "the oldest kept";
}

TEST(StepCounterPageTest, SharedPageIsASealedMemfdTheDaemonCanMapAndRead) {
  AnnotationState state;
  MarkStepN(state, 41, 5'000);  // counted privately before the page exists
  StepCounterPage page;
  page.Install(&state);
  ASSERT_GE(page.fd(), 0);
  EXPECT_NE(state.counters.load(), &state.private_counters);

  struct stat st {};
  ASSERT_EQ(fstat(page.fd(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), steps::kStepPageBytes);
  const int seals = fcntl(page.fd(), F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  EXPECT_NE(ftruncate(page.fd(), 0), 0);
  EXPECT_NE(fcntl(page.fd(), F_GETFD) & FD_CLOEXEC, 0);

  DaemonView view(page.fd());
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view.At<uint32_t>(steps::kOffsetMagic), steps::kStepPageMagic);
  EXPECT_EQ(view.At<uint32_t>(steps::kOffsetVersion), steps::kStepPageVersion);
  EXPECT_EQ(view.At<uint64_t>(steps::kOffsetNextStep), 42u);  // carried over
  EXPECT_EQ(MarkStep(state, 6'000), 42u);
  EXPECT_EQ(view.At<uint64_t>(steps::kOffsetNextStep), 43u);
  EXPECT_EQ(view.At<int64_t>(steps::kOffsetLastStepNs), 6'000);
  EXPECT_EQ(view.At<int64_t>(steps::kOffsetPeriodNs), 1'000);
  EXPECT_EQ(view.At<uint64_t>(steps::kOffsetDurationsWritten), 1u);
  EXPECT_EQ(view.At<int64_t>(steps::kOffsetDurations), 1'000);

  page.Uninstall(&state);
  EXPECT_EQ(page.fd(), -1);
  EXPECT_EQ(state.counters.load(), &state.private_counters);
  EXPECT_EQ(MarkStep(state, 7'000), 43u);  // the count goes on privately
  EXPECT_EQ(view.At<uint64_t>(steps::kOffsetNextStep), 43u);
}

TEST(StepCounterPageTest, MovingCarriesTheValuesOverOnce) {
  AnnotationState state;
  StepCounters other;
  MarkStep(state, 1);
  StepCounters* old = MoveStepCounters(&state, &other);
  EXPECT_EQ(old, &state.private_counters);
  EXPECT_EQ(state.counters.load(), &other);
  EXPECT_EQ(other.next_step.load(), 1u);
  EXPECT_EQ(MoveStepCounters(&state, &other), &other);  // already there
}

TEST(StepCounterPageTest, ReinstallMakesAFreshPageCarryingTheValues) {
  AnnotationState state;
  StepCounterPage page;
  page.Install(&state);
  ASSERT_GE(page.fd(), 0);
  MarkStepN(state, 9, 100);
  // Holds the first page open, as the parent process would.
  const int first = dup(page.fd());
  page.ReinstallInForkChild(&state);
  ASSERT_GE(page.fd(), 0);
  MarkStep(state, 200);
  DaemonView parent(first);
  DaemonView child(page.fd());
  ASSERT_TRUE(parent.ok() && child.ok());
  EXPECT_EQ(parent.At<uint64_t>(steps::kOffsetNextStep), 10u);
  EXPECT_EQ(child.At<uint64_t>(steps::kOffsetNextStep), 11u);
  EXPECT_EQ(child.At<uint64_t>(steps::kOffsetDurationsWritten), 1u);
  EXPECT_EQ(child.At<int64_t>(steps::kOffsetDurations), 100) << "the ring carried over";
  EXPECT_EQ(child.At<uint32_t>(steps::kOffsetMagic), steps::kStepPageMagic);
  close(first);
  page.Uninstall(&state);
}

}  // namespace
}  // namespace gpuctl::client
