#include "cli/trace_progress.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "cli/proto_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

const absl::Time kStart = absl::FromUnixSeconds(1'700'000'000);

// What a terminal shows after `out`, written from the top left: the lines
// above the cursor. Knows the codes the displays use (cursor up to a line's
// start, clear the line); any other escape fails the test.
std::vector<std::string> LastFrame(const std::string& out) {
  std::vector<std::string> rows(1);
  size_t row = 0;
  size_t col = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    if (c == '\n') {
      ++row;
      col = 0;
      if (rows.size() <= row) rows.resize(row + 1);
      continue;
    }
    if (c == '\x1b') {
      const size_t end = out.find_first_not_of("0123456789", i + 2);
      EXPECT_EQ(out[i + 1], '[');
      const std::string arg = out.substr(i + 2, end - i - 2);
      if (out[end] == 'F') {
        const size_t n = std::stoul(arg);
        EXPECT_LE(n, row) << "cursor above the display";
        row -= std::min(n, row);
        col = 0;
      } else if (out[end] == 'K' && arg == "2") {
        rows[row].clear();
      } else {
        ADD_FAILURE() << "unexpected escape " << out.substr(i + 1, end - i);
      }
      i = end;
      continue;
    }
    std::string& line = rows[row];
    if (line.size() <= col) line.resize(col + 1, ' ');
    line[col++] = c;
  }
  rows.resize(row);
  return rows;
}

v1::TraceStarted Started(const std::string& host, const std::vector<int>& pids,
                         absl::Duration window = absl::Minutes(5)) {
  v1::TraceStarted started;
  started.set_trace_id("T1");
  started.set_host(host);
  ToProtoTime(kStart, started.mutable_start_time());
  ToProtoTime(kStart + window, started.mutable_end_time());
  for (int pid : pids) started.add_processes()->set_pid(pid);
  return started;
}

v1::ProcessProgress Phase(int pid, v1::ProcessPhase phase, uint64_t events = 0, uint64_t bytes = 0,
                          uint64_t total = 0, const std::string& message = "") {
  v1::ProcessProgress p;
  p.set_pid(pid);
  p.set_phase(phase);
  p.set_message(message);
  p.set_events_received(events);
  p.set_bytes_received(bytes);
  p.set_bytes_total(total);
  return p;
}

v1::ProcessResult Ok(int pid, uint64_t events, uint64_t payload, uint64_t stored) {
  v1::ProcessResult r;
  r.set_pid(pid);
  r.set_status(v1::CAPTURE_STATUS_OK);
  r.set_event_count(events);
  r.set_payload_bytes(payload);
  r.set_stored_bytes(stored);
  return r;
}

class TerminalProgressTest : public ::testing::Test {
 protected:
  std::unique_ptr<TraceProgress> Make(std::vector<std::string> targets, size_t columns = 200) {
    LiveDisplayOptions options;
    options.now = [this] { return now_; };
    options.redraw_interval = absl::ZeroDuration();
    return MakeTerminalProgress(err_, columns, std::move(targets), std::move(options));
  }
  std::ostringstream err_;
  absl::Time now_ = kStart - absl::Milliseconds(500);
};

TEST_F(TerminalProgressTest, OneHostCountsDownTheWindowOnTicks) {
  auto progress = Make({"node1:7070"});
  progress->Started(0, Started("node1", {100, 101}));
  EXPECT_THAT(LastFrame(err_.str()),
              ElementsAre("trace T1: 2 processes selected on node1, window 5m",
                          "  window opens in 0:01; 2 requested", "  pid 100: requested",
                          "  pid 101: requested"));
  progress->Progress(0, Phase(100, v1::PROCESS_PHASE_CAPTURING));
  now_ = kStart + absl::Seconds(42.7);
  progress->Tick();
  EXPECT_THAT(LastFrame(err_.str()),
              ElementsAre("trace T1: 2 processes selected on node1, window 5m",
                          "  window 0:42 of 5:00, 4:18 left; 1 requested, 1 capturing",
                          "  pid 100: capturing", "  pid 101: requested"));
  // The window is over: data arrives, then one process is converted.
  now_ = kStart + absl::Minutes(5) + absl::Seconds(3);
  progress->Progress(
      0, Phase(100, v1::PROCESS_PHASE_CAPTURING, 5000, 1 << 20, 4 << 20, "receiving trace data"));
  progress->Progress(0, Phase(101, v1::PROCESS_PHASE_PROCESSING, 7000, 2 << 20, 2 << 20));
  EXPECT_THAT(
      LastFrame(err_.str()),
      ElementsAre("trace T1: 2 processes selected on node1, window 5m",
                  "  window of 5:00 closed 0:03 ago; 1 capturing, 1 processing; "
                  "3.0 MiB of 6.0 MiB received",
                  "  pid 100: capturing (receiving trace data), 1.0 MiB of 4.0 MiB received",
                  "  pid 101: processing, 7000 events, 2.0 MiB received"));
  progress->Result(0, Ok(101, 7000, 2 << 20, 300 << 10));
  EXPECT_THAT(
      LastFrame(err_.str()),
      ElementsAre("trace T1: 2 processes selected on node1, window 5m",
                  "  window of 5:00 closed 0:03 ago; 1 capturing, 1 done (1 ok); "
                  "3.0 MiB of 6.0 MiB received",
                  "  pid 100: capturing (receiving trace data), 1.0 MiB of 4.0 MiB received",
                  "  pid 101: ok, 7000 events, 300.0 KiB"));
  progress->Finish();
  // Erased: line by line, the cursor back where the display began.
  EXPECT_THAT(LastFrame(err_.str()), ElementsAre());
  EXPECT_THAT(err_.str(), HasSubstr("\x1b[4F\x1b[2K\n\x1b[2K\n\x1b[2K\n\x1b[2K\n\x1b[4F"));
  EXPECT_THAT(err_.str(), Not(HasSubstr("\x1b[J")));  // tmux would keep the screen
  const size_t size = err_.str().size();
  progress->Tick();
  EXPECT_EQ(err_.str().size(), size) << "a tick after Finish drew";
}

TEST_F(TerminalProgressTest, IterationWindowShowsStepsAndTheBound) {
  auto progress = Make({"node1:7070"});
  v1::TraceStarted started = Started("node1", {100}, absl::Minutes(2));
  started.set_start_step(100);
  started.set_iterations(10);
  progress->Started(0, started);
  now_ = kStart + absl::Seconds(12);
  progress->Tick();
  EXPECT_THAT(LastFrame(err_.str())[1],
              "  steps 100-109, 0:12 so far (bound in 1:48); 1 requested");
}

TEST_F(TerminalProgressTest, FanOutShowsALinePerHostWithReceivedData) {
  auto progress = Make({"node1:7070", "node22:7070"});
  progress->Connecting(0);
  progress->Connecting(1);
  progress->Started(0, Started("node1", {100, 101}));
  progress->Started(1, Started("node22", {200}));
  now_ = kStart + absl::Seconds(61);
  progress->Progress(0, Phase(100, v1::PROCESS_PHASE_CAPTURING));
  progress->Progress(1, Phase(200, v1::PROCESS_PHASE_PROCESSING, 900, 3 << 20, 3 << 20));
  EXPECT_THAT(
      LastFrame(err_.str()),
      ElementsAre("trace T1: 2 hosts, window 5m",
                  "  window 1:01 of 5:00, 3:59 left; 1 requested, 1 capturing, 1 processing; "
                  "900 events, 3.0 MiB received",
                  "  node1:7070   2 selected: 1 requested, 1 capturing",
                  "  node22:7070  1 selected: 1 processing; 900 events, 3.0 MiB received"));
  progress->HostDone(1, HostStatus::kUnreachable, "cannot reach gpuctld");
  EXPECT_THAT(LastFrame(err_.str())[3],
              "  node22:7070  unreachable, 0 of 1 processes ok: cannot reach gpuctld");
  progress->Finish();
  EXPECT_THAT(LastFrame(err_.str()), ElementsAre());
}

TEST_F(TerminalProgressTest, LinesAreCutToTheWidth) {
  auto progress = Make({"node1:7070"}, 30);
  progress->Started(0, Started("node1", {100}));
  for (const std::string& line : LastFrame(err_.str())) EXPECT_LE(line.size(), 29u) << line;
}

TEST_F(TerminalProgressTest, ManyProcessesAreSummarized) {
  auto progress = Make({"node1:7070"});
  std::vector<int> pids;
  for (int pid = 100; pid < 140; ++pid) pids.push_back(pid);
  progress->Started(0, Started("node1", pids));
  progress->Result(0, Ok(100, 1, 10, 10));
  EXPECT_THAT(LastFrame(err_.str()),
              ElementsAre("trace T1: 40 processes selected on node1, window 5m",
                          "  window opens in 0:01; 39 requested, 1 done (1 ok); "
                          "1 events, 10 B received",
                          "  1 of 40 processes done"));
}

// The display's own thread redraws while no event comes.
TEST(TerminalProgressTimerTest, RedrawsOnItsOwnAndStopsInFinish) {
  struct Sink : std::stringbuf {
    absl::Mutex mu;
    int syncs = 0;
    absl::Notification ticked;
    int sync() override {
      absl::MutexLock lock(&mu);
      if (++syncs >= 4 && !ticked.HasBeenNotified()) ticked.Notify();
      return 0;
    }
  } sink;
  std::ostream err(&sink);
  LiveDisplayOptions options;
  options.redraw_interval = absl::Milliseconds(5);
  auto progress = MakeTerminalProgress(err, 80, {"node1:7070"}, options);
  progress->Started(0, Started("node1", {100}));  // one flush
  EXPECT_TRUE(sink.ticked.WaitForNotificationWithTimeout(absl::Seconds(60)));
  progress->Finish();
  int syncs = 0;
  {
    absl::MutexLock lock(&sink.mu);
    syncs = sink.syncs;
  }
  progress.reset();
  absl::MutexLock lock(&sink.mu);
  EXPECT_EQ(sink.syncs, syncs) << "redrawn after Finish";
}

TEST(PlainProgressTest, ReceivedCountsPrintNoLines) {
  std::ostringstream err;
  auto progress = MakePlainProgress(err, {"node1:7070"});
  progress->Started(0, Started("node1", {100}));
  for (uint64_t bytes = 1; bytes < 50; ++bytes) {
    progress->Progress(
        0, Phase(100, v1::PROCESS_PHASE_CAPTURING, 5, bytes, 100, "receiving trace data"));
  }
  progress->Progress(0, Phase(100, v1::PROCESS_PHASE_PROCESSING, 5, 100, 100));
  progress->Finish();
  EXPECT_EQ(err.str(),
            "trace T1: 1 process selected on node1, window 5m\n"
            "pid 100: capturing (receiving trace data)\n"
            "pid 100: processing\n");
  EXPECT_THAT(err.str(), Not(HasSubstr("\x1b")));
}

TEST(DownloadProgressTest, ShowsFilesAndBytesPerHost) {
  std::ostringstream err;
  absl::Time now = kStart;
  LiveDisplayOptions options;
  options.now = [&now] { return now; };
  options.redraw_interval = absl::Milliseconds(100);
  auto progress = MakeTerminalDownloadProgress(err, 200, {"a:1", "bb:1", "c:1"}, options);
  progress->Begin(0, 2, 4 << 20);
  progress->Begin(1, 1, 1 << 20);
  progress->Update(0, 0, 1 << 20);  // within the interval: not drawn
  EXPECT_THAT(LastFrame(err.str()),
              ElementsAre("  a:1   downloading, 0 of 2 files, 0 B of 4.0 MiB",
                          "  bb:1  downloading, 0 of 1 files, 0 B of 1.0 MiB"));
  now += absl::Milliseconds(100);
  progress->Update(0, 1, 2 << 20);
  progress->Update(1, 1, 1 << 20);
  progress->Done(1, absl::OkStatus());
  EXPECT_THAT(LastFrame(err.str()),
              ElementsAre("  a:1   downloading, 1 of 2 files, 2.0 MiB of 4.0 MiB",
                          "  bb:1  downloaded, 1 of 1 files, 1.0 MiB of 1.0 MiB"));
  progress->Done(0, absl::UnavailableError("connection reset"));
  EXPECT_THAT(LastFrame(err.str())[0], "  a:1   failed: connection reset");
  progress->Finish();
  EXPECT_THAT(LastFrame(err.str()), ElementsAre());
}

}  // namespace
}  // namespace gpuctl::cli
