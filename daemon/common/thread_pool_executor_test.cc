#include "daemon/common/thread_pool_executor.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

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

}  // namespace
}  // namespace gpuctl
