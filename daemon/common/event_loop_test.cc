#include "daemon/common/event_loop.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "daemon/common/testing/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::ElementsAre;

constexpr absl::Duration kWait = absl::Seconds(30);

class EventLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = EventLoop::Create();
    ASSERT_TRUE(loop.ok()) << loop.status();
    loop_ = std::move(*loop);
  }
  void StartThread() {
    thread_ = std::thread([this] { loop_->Run(); });
  }
  void TearDown() override {
    if (thread_.joinable()) {
      loop_->Quit();
      thread_.join();
    }
  }
  // Runs `fn` on the loop thread and waits for it.
  void RunOnLoop(absl::AnyInvocable<void() &&> fn) {
    gpuctl::testing::Notification done;
    loop_->Post([&] {
      std::move(fn)();
      done.Notify();
    });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWait));
  }

  std::unique_ptr<EventLoop> loop_;
  std::thread thread_;
};

TEST_F(EventLoopTest, PostsFromManyThreadsAllRunInPerThreadOrder) {
  StartThread();
  constexpr int kThreads = 8;
  constexpr int kPerThread = 2000;
  std::vector<std::vector<int>> seen(kThreads);  // touched on the loop only
  std::atomic<int> remaining{kThreads * kPerThread};
  gpuctl::testing::Notification all_done;
  std::vector<std::thread> posters;
  posters.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    posters.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        loop_->Post([&, t, i] {
          EXPECT_TRUE(loop_->IsLoopThread());
          seen[t].push_back(i);
          if (remaining.fetch_sub(1) == 1) all_done.Notify();
        });
      }
    });
  }
  for (auto& p : posters) p.join();
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(kWait));
  RunOnLoop([&] {
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_EQ(seen[t].size(), static_cast<size_t>(kPerThread));
      for (int i = 0; i < kPerThread; ++i) ASSERT_EQ(seen[t][i], i);
    }
  });
}

TEST_F(EventLoopTest, TimersFireInDeadlineOrderAndCancelledOnesNever) {
  StartThread();
  std::vector<int> order;
  gpuctl::testing::Notification done;
  RunOnLoop([&] {
    loop_->PostDelayed(absl::Milliseconds(60), [&] { order.push_back(3); });
    loop_->PostDelayed(absl::Milliseconds(20), [&] { order.push_back(1); });
    TaskRunner::TimerId cancelled =
        loop_->PostDelayed(absl::Milliseconds(30), [&] { order.push_back(99); });
    loop_->PostDelayed(absl::Milliseconds(40), [&] { order.push_back(2); });
    loop_->PostDelayed(absl::Milliseconds(80), [&] { done.Notify(); });
    loop_->Cancel(cancelled);
    loop_->Cancel(cancelled);  // twice is a no-op
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWait));
  RunOnLoop([&] { EXPECT_THAT(order, ElementsAre(1, 2, 3)); });
}

TEST_F(EventLoopTest, TimerNeverFiresEarly) {
  StartThread();
  gpuctl::testing::Notification done;
  absl::Time fired;
  absl::Time posted;
  RunOnLoop([&] {
    posted = absl::Now();
    loop_->PostDelayed(absl::Milliseconds(50), [&] {
      fired = absl::Now();
      done.Notify();
    });
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWait));
  EXPECT_GE(fired - posted, absl::Milliseconds(49));
}

TEST_F(EventLoopTest, TimersWithEqualDeadlinesRunInPostingOrder) {
  StartThread();
  std::vector<int> order;
  gpuctl::testing::Notification done;
  RunOnLoop([&] {
    for (int i = 0; i < 5; ++i)
      loop_->PostDelayed(absl::ZeroDuration(), [&, i] {
        order.push_back(i);
        if (i == 4) done.Notify();
      });
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWait));
  RunOnLoop([&] { EXPECT_THAT(order, ElementsAre(0, 1, 2, 3, 4)); });
}

TEST_F(EventLoopTest, TimerIdsAreNonZeroAndCancelFromTimerWorks) {
  StartThread();
  gpuctl::testing::Notification done;
  bool second_ran = false;
  TaskRunner::TimerId second = 0;
  RunOnLoop([&] {
    TaskRunner::TimerId first =
        loop_->PostDelayed(absl::Milliseconds(5), [&] { loop_->Cancel(second); });
    second = loop_->PostDelayed(absl::Milliseconds(30), [&] { second_ran = true; });
    loop_->PostDelayed(absl::Milliseconds(60), [&] { done.Notify(); });
    EXPECT_NE(first, 0u);
    EXPECT_NE(second, 0u);
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWait));
  RunOnLoop([&] { EXPECT_FALSE(second_ran); });
}

TEST_F(EventLoopTest, FdReadinessDeliversEventsAndModifyChangesThem) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  std::atomic<int> readable{0};
  gpuctl::testing::Notification got_read;
  gpuctl::testing::Notification got_write;
  ASSERT_TRUE(loop_
                  ->AddFd(sv[0], EPOLLIN,
                          [&](uint32_t events) {
                            if (events & EPOLLIN) {
                              char buf[16];
                              while (read(sv[0], buf, sizeof(buf)) > 0) ++readable;
                              got_read.Notify();
                            }
                            if (events & EPOLLOUT) {
                              loop_->RemoveFd(
                                  sv[0]);  // level-triggered: stop after the first report
                              got_write.Notify();
                            }
                          })
                  .ok());
  EXPECT_FALSE(loop_->AddFd(sv[0], EPOLLIN, [](uint32_t) {}).ok());
  StartThread();
  ASSERT_EQ(write(sv[1], "x", 1), 1);
  ASSERT_TRUE(got_read.WaitForNotificationWithTimeout(kWait));
  EXPECT_EQ(readable.load(), 1);
  RunOnLoop([&] { ASSERT_TRUE(loop_->ModifyFd(sv[0], EPOLLIN | EPOLLOUT).ok()); });
  ASSERT_TRUE(got_write.WaitForNotificationWithTimeout(kWait));
  RunOnLoop([&] { EXPECT_FALSE(loop_->ModifyFd(sv[0], EPOLLIN).ok()); });
  close(sv[0]);
  close(sv[1]);
}

TEST_F(EventLoopTest, RemovingAnotherFdInsideCallbackSuppressesItsPendingEvent) {
  int a[2];
  int b[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, a), 0);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, b), 0);
  // Both fds are readable before the loop starts, so one epoll_wait reports
  // both; whichever runs first removes and closes the other.
  ASSERT_EQ(write(a[1], "x", 1), 1);
  ASSERT_EQ(write(b[1], "x", 1), 1);
  std::atomic<int> calls{0};
  gpuctl::testing::Notification done;
  int* fds[2] = {&a[0], &b[0]};
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(loop_
                    ->AddFd(*fds[i], EPOLLIN,
                            [&, i](uint32_t) {
                              ++calls;
                              int other = *fds[1 - i];
                              int self = *fds[i];
                              loop_->RemoveFd(other);
                              close(other);
                              loop_->RemoveFd(self);  // removing itself while running is safe
                              close(self);
                              loop_->PostDelayed(absl::Milliseconds(20), [&] { done.Notify(); });
                            })
                    .ok());
  }
  StartThread();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWait));
  EXPECT_EQ(calls.load(), 1);
  close(a[1]);
  close(b[1]);
}

TEST_F(EventLoopTest, QuitFromAnotherThreadStopsRunAndRunCanRestart) {
  StartThread();
  gpuctl::testing::Notification ran;
  loop_->Post([&] { ran.Notify(); });
  ASSERT_TRUE(ran.WaitForNotificationWithTimeout(kWait));
  loop_->Quit();
  thread_.join();
  gpuctl::testing::Notification ran_again;
  loop_->Post([&] { ran_again.Notify(); });
  StartThread();
  ASSERT_TRUE(ran_again.WaitForNotificationWithTimeout(kWait));
}

TEST_F(EventLoopTest, UnrunTasksAreDestroyedWithTheLoop) {
  auto token = std::make_shared<int>(1);
  std::weak_ptr<int> weak = token;
  loop_->Post([token = std::move(token)] {});
  loop_.reset();
  EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace gpuctl::daemon
