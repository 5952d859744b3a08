#include "daemon/hostctx/window_events.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/hostctx/testing/samples.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::hostctx {
namespace {

using testing::SampleAt;

// Names 0x1000 and counts its lookups: WindowEvents asks once per frame.
class CountingFrames final : public FrameSymbolizer {
 public:
  Frame Symbolize(pid_t pid, uint32_t space, uint64_t address, bool is_return_address) override {
    ++lookups;
    Frame frame;
    if (address == 0x1000) frame.function = is_return_address ? "caller" : "hot";
    return frame;
  }
  int lookups = 0;
};

ContextSwitch Switch(uint32_t tid, uint64_t time_ns, bool out) {
  ContextSwitch s;
  s.pid = 10;
  s.tid = tid;
  s.time_ns = time_ns;
  s.out = out;
  return s;
}

HostCapture Capture() {
  HostCapture capture;
  capture.start_ns = 1'000'000'000;
  capture.stop_ns = 3'000'000'000;
  capture.roots = {10};
  capture.threads.push_back({10, 10, 1'000'000'000, "main", "app"});
  capture.threads.push_back({10, 11, 1'000'000'000, "loader", "app"});
  capture.threads.push_back({20, 20, 1'000'000'000, "worker", "helper"});
  capture.samples.push_back(SampleAt(10, 10, 1'100'000'000, {0x1000, 0x1000}));  // before
  capture.samples.push_back(SampleAt(10, 10, 1'600'000'000, {0x1000, 0x1000}));
  capture.samples.push_back(SampleAt(20, 20, 1'700'000'000, {0x1000, 0x2000}));
  capture.samples.push_back(SampleAt(10, 10, 2'900'000'000, {0x1000}));  // after
  // Thread 11 blocked from 1.4 s to 1.8 s, and again from 2.4 s on.
  capture.switches = {Switch(11, 1'300'000'000, false), Switch(11, 1'400'000'000, true),
                      Switch(11, 1'800'000'000, false), Switch(11, 2'400'000'000, true)};
  capture.lost_records = 3;
  capture.dropped_samples = 4;
  capture.error_count = 1;
  capture.errors.push_back({12, absl::PermissionDeniedError("perf_event_open on thread 12")});
  return capture;
}

std::vector<nlohmann::json> Events(const WindowEvents& events, int64_t base, int64_t start,
                                   int64_t end, WindowEvents::Written* written) {
  std::vector<nlohmann::json> out;
  *written = events.Write(base, start, end, [&](absl::string_view event) {
    out.push_back(nlohmann::json::parse(event));
  });
  return out;
}

TEST(WindowEventsTest, WritesWhatFallsInTheWindowOnItsTimeBase) {
  CountingFrames frames;
  WindowEvents events(Capture(), &frames, /*samples=*/true, /*switches=*/true);
  // Four distinct (pid, address, innermost or not) frames among the samples.
  EXPECT_EQ(frames.lookups, 4);
  WindowEvents::Written written;
  const auto out = Events(events, 1'000'000'000, 1'500'000'000, 2'500'000'000, &written);
  EXPECT_EQ(written.samples, 2u);
  EXPECT_EQ(written.off_cpu_intervals, 2u);
  std::vector<nlohmann::json> samples, slices;
  bool helper_named = false;
  for (const auto& e : out) {
    if (e.value("cat", "") == "cpu_sample") samples.push_back(e);
    if (e.value("cat", "") == "off_cpu") slices.push_back(e);
    if (e.value("name", "") == "process_name" && e["pid"] == 20) {
      helper_named = e["args"]["name"] == "helper";
    }
  }
  EXPECT_TRUE(helper_named);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0]["name"], "hot");
  EXPECT_EQ(samples[0]["args"]["stack"], nlohmann::json::array({"hot", "caller"}));
  EXPECT_DOUBLE_EQ(samples[0]["ts"].get<double>(), 600000.0);
  EXPECT_EQ(samples[1]["pid"], 20);
  // The intervals are cut to the window: 1.5-1.8 s and 2.4-2.5 s.
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_DOUBLE_EQ(slices[0]["ts"].get<double>(), 500000.0);
  EXPECT_DOUBLE_EQ(slices[0]["dur"].get<double>(), 300000.0);
  EXPECT_EQ(slices[0]["name"], "off_cpu (blocked)");
  EXPECT_DOUBLE_EQ(slices[1]["ts"].get<double>(), 1400000.0);
  EXPECT_DOUBLE_EQ(slices[1]["dur"].get<double>(), 100000.0);
}

TEST(WindowEventsTest, CpuOrSchedAlone) {
  CountingFrames frames;
  WindowEvents samples_only(Capture(), &frames, true, false);
  WindowEvents::Written written;
  Events(samples_only, 0, 1'000'000'000, 3'000'000'000, &written);
  EXPECT_EQ(written.samples, 4u);
  EXPECT_EQ(written.off_cpu_intervals, 0u);
  frames.lookups = 0;
  WindowEvents switches_only(Capture(), &frames, false, true);
  EXPECT_EQ(frames.lookups, 0);
  Events(switches_only, 0, 1'000'000'000, 3'000'000'000, &written);
  EXPECT_EQ(written.samples, 0u);
  EXPECT_GT(written.off_cpu_intervals, 0u);
}

TEST(WindowEventsTest, ATracedProcessesThreadsTakeTheIdsOfItsOwnNamespace) {
  CountingFrames frames;
  WindowEvents events(Capture(), &frames, true, true, {{10, 1}, {11, 2}});
  WindowEvents::Written written;
  const auto out = Events(events, 0, 1'000'000'000, 3'000'000'000, &written);
  std::vector<std::pair<int, int>> rows;
  for (const auto& e : out) {
    if (e.value("name", "") == "thread_name") rows.emplace_back(e["pid"], e["tid"]);
    if (e.value("cat", "") == "cpu_sample" && e["pid"] == 10) {
      EXPECT_EQ(e["tid"], 1);
    }
    if (e.value("cat", "") == "off_cpu") {
      EXPECT_EQ(e["tid"], 2);
    }
  }
  // The helper's threads keep the daemon's ids, as its pid does.
  EXPECT_EQ(rows, (std::vector<std::pair<int, int>>{{10, 1}, {10, 2}, {20, 20}}));
}

TEST(WindowEventsTest, NamespaceThreadIdsReadsTheRootsThreadsLastNsPid) {
  char dir_template[] = "/tmp/gpuctl-nstid-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string root = dir_template;
  auto status = [&](int pid, int tid, const std::string& nspid) {
    const std::string dir = absl::StrCat(root, "/", pid, "/task/", tid);
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/status") << "Name:\tx\nNSpid:\t" << nspid << "\nNStgid:\t1\n";
  };
  status(10, 10, "10\t1");
  status(10, 11, "11");     // the same id: left out
  status(20, 20, "20\t5");  // a descendant: left out
  const absl::flat_hash_map<pid_t, pid_t> ids = NamespaceThreadIds(root, Capture());
  std::filesystem::remove_all(root);
  EXPECT_EQ(ids, (absl::flat_hash_map<pid_t, pid_t>{{10, 1}}));
}

TEST(WindowEventsTest, SummaryCountsTheCapture) {
  CountingFrames frames;
  const v1::HostContextResult summary = WindowEvents(Capture(), &frames, true, true).Summary();
  EXPECT_EQ(summary.state(), v1::HostContextResult::STATE_RECORDED);
  EXPECT_EQ(summary.threads(), 3u);
  EXPECT_EQ(summary.processes(), 2u);
  EXPECT_EQ(summary.switches(), 4u);
  EXPECT_EQ(summary.lost_records(), 3u);
  EXPECT_EQ(summary.dropped_samples(), 4u);
  EXPECT_EQ(summary.thread_errors(), 1u);
  EXPECT_NE(summary.reason().find("perf_event_open on thread 12"), std::string::npos);
}

}  // namespace
}  // namespace gpuctl::hostctx
