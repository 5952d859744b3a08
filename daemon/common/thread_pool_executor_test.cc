#include "daemon/common/thread_pool_executor.h"

#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "daemon/common/testing/notification.h"
#include "gtest/gtest.h"

namespace gpuctl {
namespace {

TEST(ThreadPoolExecutorTest, RunsEveryTask) {
  std::atomic<int> count{0};
  {
    ThreadPoolExecutor pool(3);
    for (int i = 0; i < 1000; ++i) pool.Run([&] { count.fetch_add(1); });
  }  // destructor drains
  EXPECT_EQ(count.load(), 1000);
}

TEST(ThreadPoolExecutorTest, UsesSeveralThreads) {
  ThreadPoolExecutor pool(2);
  std::mutex mu;
  std::condition_variable arrived_cv;
  int arrived = 0;
  std::set<std::thread::id> ids;
  // Two tasks that each wait for the other prove two threads run at once.
  for (int i = 0; i < 2; ++i) {
    pool.Run([&] {
      std::unique_lock<std::mutex> lock(mu);
      ++arrived;
      ids.insert(std::this_thread::get_id());
      arrived_cv.notify_all();
      EXPECT_TRUE(
          arrived_cv.wait_for(lock, std::chrono::seconds(30), [&] { return arrived == 2; }));
    });
  }
  pool.Shutdown();
  EXPECT_EQ(ids.size(), 2u);
}

TEST(ThreadPoolExecutorTest, ShutdownDrainsTasksQueuedByTasks) {
  std::atomic<int> count{0};
  ThreadPoolExecutor pool(1);
  testing::Notification gate;
  pool.Run([&] {
    gate.WaitForNotification();
    pool.Run([&] { count.fetch_add(1); });
    count.fetch_add(1);
  });
  std::thread releaser([&] { gate.Notify(); });
  pool.Shutdown();
  releaser.join();
  EXPECT_EQ(count.load(), 2);
  pool.Run([&] { count.fetch_add(1); });  // dropped
  pool.Shutdown();
  EXPECT_EQ(count.load(), 2);
}

TEST(ThreadPoolExecutorTest, ThreadsTakeTheirPriority) {
  // The test may itself run niced (a niced CI job): the calling thread must
  // keep whatever it had.
  const int own_nice = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
  std::atomic<int> nice{-100};
  std::atomic<int> policy{-1};
  {
    ThreadPoolExecutor low(1, ThreadPriority{.nice = 7});
    low.Run([&] { nice = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())); });
    ThreadPoolExecutor idle(1, ThreadPriority{.idle = true});
    idle.Run([&] { policy = sched_getscheduler(0); });
  }
  EXPECT_EQ(nice.load(), 7);
  EXPECT_EQ(policy.load(), SCHED_IDLE);
  EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())), own_nice);
}

// CPU time spent by the calling thread.
std::chrono::nanoseconds ThreadCpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

void Spin(std::chrono::nanoseconds cpu, const std::atomic<bool>& stop) {
  const std::chrono::nanoseconds until = ThreadCpu() + cpu;
  while (ThreadCpu() < until && !stop.load(std::memory_order_relaxed)) {
  }
}

// With every core kept busy by normal-priority threads (the job) and the
// low-priority pool holding seconds of work, work on the normal pool runs
// at once: it never queues behind the background pool. The background pool
// still progresses: slowed, not starved.
TEST(ThreadPoolExecutorTest, UrgentWorkDoesNotWaitForBackgroundWorkWithEveryCoreBusy) {
  using namespace std::chrono_literals;
  std::atomic<bool> stop{false};
  std::vector<std::thread> job;
  for (unsigned i = 0; i < std::max(1u, std::thread::hardware_concurrency()); ++i) {
    job.emplace_back([&] { Spin(600s, stop); });
  }
  std::atomic<int> background_done{0};
  testing::Notification urgent_done;
  {
    ThreadPoolExecutor background(1, ThreadPriority{.nice = 19});
    background.Run([&] {
      Spin(2ms, stop);
      background_done.fetch_add(1);
    });
    for (int i = 0; i < 4; ++i) background.Run([&] { Spin(5s, stop); });
    ThreadPoolExecutor urgent(1);
    const auto asked = std::chrono::steady_clock::now();
    urgent.Run([&] {
      Spin(20ms, stop);
      urgent_done.Notify();
    });
    // Far less than the background's 20 s of queued CPU work.
    EXPECT_TRUE(urgent_done.WaitForNotificationWithTimeout(absl::Seconds(10)));
    EXPECT_LT(std::chrono::steady_clock::now() - asked, 10s);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (background_done.load() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
    EXPECT_EQ(background_done.load(), 1);
    stop = true;
  }
  for (std::thread& t : job) t.join();
}

}  // namespace
}  // namespace gpuctl
