#include "cli/interrupt.h"

#include <signal.h>

#include <atomic>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace gpuctl::cli {
namespace {

TEST(CliSignalInterruptSourceTest, SigintRunsHandlerOnWatcherThread) {
  absl::StatusOr<std::unique_ptr<SignalInterruptSource>> source = SignalInterruptSource::Create();
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_FALSE(SignalInterruptSource::Create().ok());  // one at a time

  absl::Notification fired;
  std::thread::id handler_thread;
  (*source)->SetHandler([&] {
    handler_thread = std::this_thread::get_id();
    fired.Notify();
  });
  ASSERT_EQ(raise(SIGINT), 0);
  ASSERT_TRUE(fired.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_NE(handler_thread, std::this_thread::get_id());

  // The first interrupt restored the previous disposition.
  struct sigaction current = {};
  sigaction(SIGINT, nullptr, &current);
  EXPECT_EQ(current.sa_handler, SIG_DFL);
  (*source)->SetHandler(nullptr);
  source->reset();
  EXPECT_TRUE(SignalInterruptSource::Create().ok());
}

TEST(CliSignalInterruptSourceTest, SigtermAndScopedHandler) {
  absl::StatusOr<std::unique_ptr<SignalInterruptSource>> source = SignalInterruptSource::Create();
  ASSERT_TRUE(source.ok());
  absl::Notification fired;
  {
    ScopedInterruptHandler scoped(source->get(), [&] { fired.Notify(); });
    ASSERT_EQ(raise(SIGTERM), 0);
    ASSERT_TRUE(fired.WaitForNotificationWithTimeout(absl::Seconds(10)));
  }
}

TEST(CliSignalInterruptSourceTest, DestroyWithoutSignalRestoresDisposition) {
  {
    absl::StatusOr<std::unique_ptr<SignalInterruptSource>> source = SignalInterruptSource::Create();
    ASSERT_TRUE(source.ok());
    struct sigaction installed = {};
    sigaction(SIGINT, nullptr, &installed);
    EXPECT_NE(installed.sa_handler, SIG_DFL);
  }
  struct sigaction after = {};
  sigaction(SIGINT, nullptr, &after);
  EXPECT_EQ(after.sa_handler, SIG_DFL);
}

TEST(CliScopedInterruptHandlerTest, NullSourceIsFine) {
  ScopedInterruptHandler scoped(nullptr, [] {});
}

}  // namespace
}  // namespace gpuctl::cli
