#include "daemon/common/thread_pool_executor.h"

#include <atomic>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
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
  absl::Mutex mu;
  int arrived = 0;
  std::set<std::thread::id> ids;
  // Two tasks that each wait for the other prove two threads run at once.
  for (int i = 0; i < 2; ++i) {
    pool.Run([&] {
      absl::MutexLock lock(&mu);
      ++arrived;
      ids.insert(std::this_thread::get_id());
      EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                          +[](int* n) { return *n == 2; }, &arrived),
                                      absl::Seconds(30)));
    });
  }
  pool.Shutdown();
  EXPECT_EQ(ids.size(), 2u);
}

TEST(ThreadPoolExecutorTest, ShutdownDrainsTasksQueuedByTasks) {
  std::atomic<int> count{0};
  ThreadPoolExecutor pool(1);
  absl::Notification gate;
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

}  // namespace
}  // namespace gpuctl
