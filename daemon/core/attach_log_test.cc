#include "daemon/core/attach_log.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "daemon/common/log.h"
#include "daemon/common/testing/fake_clock.h"
#include "daemon/common/testing/fake_task_runner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::gpuctl::testing::FakeClock;
using ::gpuctl::testing::FakeTaskRunner;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

class AttachLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogSinkForTesting([this](absl::string_view line) { lines_.emplace_back(line); });
  }
  void TearDown() override { SetLogSinkForTesting(nullptr); }

  static AttachLog::Process Program(int32_t pid, std::string program) {
    return {.pid = pid, .job_id = "42", .rank = 0, .program = std::move(program)};
  }
  std::vector<std::string> Lines(absl::string_view msg) const {
    std::vector<std::string> out;
    for (const std::string& line : lines_) {
      if (absl::StrContains(line, absl::StrCat("msg=\"", msg, "\""))) out.push_back(line);
    }
    return out;
  }

  FakeClock clock_;
  FakeTaskRunner loop_{&clock_};
  std::vector<std::string> lines_;
};

TEST_F(AttachLogTest, AProcessThatStaysIsLoggedOnceItSettledAndWhenItLeaves) {
  AttachLog log(&loop_, &clock_, {.settle = absl::Seconds(2)});
  log.Attached(1, Program(100, "python3"));
  loop_.AdvanceBy(absl::Seconds(1));
  EXPECT_THAT(Lines("process attached"), IsEmpty());
  loop_.AdvanceBy(absl::Seconds(1));
  ASSERT_THAT(Lines("process attached"), SizeIs(1));
  EXPECT_THAT(Lines("process attached")[0], AllOf(HasSubstr("pid=100"), HasSubstr("program=python3"),
                                                  HasSubstr("job_id=42")));
  log.Detached(1, /*clean=*/true, "closed after Goodbye", /*in_trace=*/false);
  ASSERT_THAT(Lines("process detached"), SizeIs(1));
  EXPECT_THAT(Lines("process detached")[0], HasSubstr("pid=100"));
}

// What a pyenv shim or a preloaded shell execs on the way: dozens of
// processes in a second, each gone at once.
TEST_F(AttachLogTest, ProcessesGoneBeforeTheySettledMakeOneSummaryLine) {
  AttachLog log(&loop_, &clock_, {.settle = absl::Seconds(2), .summary_every = absl::Minutes(1)});
  for (int i = 0; i < 80; ++i) {
    log.Attached(i, Program(1000 + i, i % 2 == 0 ? "bash" : "pyenv"));
    loop_.AdvanceBy(absl::Milliseconds(10));
    log.Detached(i, /*clean=*/false, "connection closed", /*in_trace=*/false);
  }
  EXPECT_EQ(log.pending_short_lived(), 80u);
  loop_.AdvanceBy(absl::Minutes(1));
  EXPECT_THAT(Lines("process attached"), IsEmpty());
  EXPECT_THAT(Lines("process detached"), IsEmpty());
  ASSERT_THAT(Lines("short-lived processes attached and left"), SizeIs(1));
  EXPECT_THAT(Lines("short-lived processes attached and left")[0],
              AllOf(HasSubstr("count=80"), HasSubstr("programs=bash,pyenv"), HasSubstr("within=2s")));
  EXPECT_EQ(log.pending_short_lived(), 0u);
  EXPECT_EQ(loop_.pending_timers(), 0u);
  // A quiet minute: no line.
  loop_.AdvanceBy(absl::Minutes(5));
  EXPECT_THAT(Lines("short-lived processes attached and left"), SizeIs(1));
}

TEST_F(AttachLogTest, AProcessATraceSelectsIsLoggedAtOnceEvenIfItLeavesSoon) {
  AttachLog log(&loop_, &clock_, {.settle = absl::Seconds(2)});
  log.Attached(1, Program(100, "python3"));
  log.Noteworthy(1);
  EXPECT_THAT(Lines("process attached"), SizeIs(1));
  log.Detached(1, /*clean=*/false, "connection closed", /*in_trace=*/true);
  EXPECT_THAT(Lines("process detached"), SizeIs(1));
  EXPECT_EQ(log.pending_short_lived(), 0u);
  // Leaving during a capture is always logged, settled or not.
  log.Attached(2, Program(101, "python3"));
  log.Detached(2, /*clean=*/false, "connection closed", /*in_trace=*/true);
  EXPECT_THAT(Lines("process attached"), SizeIs(2));
  EXPECT_THAT(Lines("process detached"), SizeIs(2));
}

TEST_F(AttachLogTest, ZeroSettleLogsEverythingAsItHappens) {
  AttachLog log(&loop_, &clock_, {.settle = absl::ZeroDuration()});
  log.Attached(1, Program(100, "true"));
  log.Detached(1, /*clean=*/false, "connection closed", /*in_trace=*/false);
  EXPECT_THAT(Lines("process attached"), SizeIs(1));
  EXPECT_THAT(Lines("process detached"), SizeIs(1));
  EXPECT_EQ(loop_.pending_timers(), 0u);
}

TEST_F(AttachLogTest, APendingSummaryIsWrittenWhenTheDaemonStops) {
  {
    AttachLog log(&loop_, &clock_, {});
    log.Attached(1, Program(100, "sh"));
    log.Detached(1, /*clean=*/false, "connection closed", /*in_trace=*/false);
  }
  EXPECT_THAT(Lines("short-lived processes attached and left"), SizeIs(1));
  EXPECT_EQ(loop_.pending_timers(), 0u);
}

}  // namespace
}  // namespace gpuctl::daemon
