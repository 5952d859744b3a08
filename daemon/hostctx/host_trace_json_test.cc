#include "daemon/hostctx/host_trace_json.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/hostctx/testing/samples.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::hostctx {
namespace {

using testing::SampleAt;

class NamedFrames final : public FrameSymbolizer {
 public:
  Frame Symbolize(pid_t pid, uint32_t space, uint64_t address, bool is_return_address) override {
    Frame frame;
    if (address == 0x1000) frame.function = "hot \"loop\"";
    if (address == 0x2000) {
      frame.module = "/bin/app";
      frame.offset = is_return_address ? 0x1ff : 0x200;
    }
    return frame;
  }
};

TEST(HostTraceJsonTest, WritesSamplesAndOffCpuIntervals) {
  HostCapture capture;
  capture.start_ns = 5'000'000'000;
  capture.stop_ns = 6'000'000'000;
  capture.samples.push_back(SampleAt(10, 11, 5'000'250'500, {0x1000, 0x2000, 0x3000}));
  capture.samples.push_back(SampleAt(10, 12, 5'000'300'000, {}));
  capture.lost_records = 2;
  capture.switch_stacks.push_back(SampleAt(10, 11, 5'000'400'000, {0x2000, 0x1000}));
  const std::vector<OffCpuInterval> off_cpu = {
      {10, 11, 5'000'400'000, 5'010'400'000, OffCpuReason::kBlocked, 0, 0},
      {10, 12, 5'000'500'000, 5'000'600'000, OffCpuReason::kPreempted, -1, 900},
      {10, 12, 5'000'700'000, 5'000'800'000, OffCpuReason::kPreempted, -1, 901}};
  capture.preemptor_names = {{900, "stress\"ng"}};
  NamedFrames names;
  const std::string text = HostContextTraceJson(capture, off_cpu, &names, 5'000'000'000);
  const auto json = nlohmann::json::parse(text);
  const auto& events = json.at("traceEvents");
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(json.at("gpuctl").at("threads_sampled"), 0);
  EXPECT_EQ(events[0].at("ph"), "i");
  EXPECT_EQ(events[0].at("cat"), "cpu_sample");
  EXPECT_EQ(events[0].at("name"), "hot \"loop\"");
  EXPECT_EQ(events[0].at("pid"), 10);
  EXPECT_EQ(events[0].at("tid"), 11);
  EXPECT_EQ(events[0].at("args").at("stack"),
            nlohmann::json::array({"hot \"loop\"", "/bin/app+0x1ff", "0x3000"}));
  EXPECT_NE(text.find("\"ts\":250.500"), std::string::npos);
  EXPECT_EQ(events[1].at("name"), "[no frames]");
  EXPECT_EQ(events[2].at("ph"), "X");
  EXPECT_EQ(events[2].at("cat"), "off_cpu");
  EXPECT_EQ(events[2].at("name"), "off_cpu (blocked)");
  EXPECT_EQ(events[2].at("args").at("reason"), "blocked");
  // The chain it left the CPU with, innermost first.
  EXPECT_EQ(events[2].at("args").at("stack"),
            nlohmann::json::array({"/bin/app+0x200", "hot \"loop\""}));
  EXPECT_EQ(events[3].at("name"), "off_cpu (preempted)");
  EXPECT_FALSE(events[3].at("args").contains("stack"));
  // The preempting process by its comm and pid; by its pid alone when its
  // comm could not be read.
  EXPECT_EQ(events[3].at("args").at("preempted_by"), "stress\"ng (pid 900)");
  EXPECT_EQ(events[4].at("args").at("preempted_by"), "pid 901");
  EXPECT_FALSE(events[2].at("args").contains("preempted_by"));
  EXPECT_NE(text.find("\"dur\":10000.000"), std::string::npos);
  EXPECT_EQ(json.at("baseTimeNanoseconds"), 5'000'000'000);
  EXPECT_EQ(json.at("gpuctl").at("lost_records"), 2);
  EXPECT_EQ(json.at("gpuctl").at("cpu_samples"), 2);
}

TEST(HostTraceJsonTest, HandsEachEventToTheSink) {
  HostCapture capture;
  capture.samples.push_back(SampleAt(1, 1, 10, {0x1000}));
  NamedFrames names;
  std::vector<std::string> events;
  WriteHostContextEvents(capture, {}, &names, 0,
                         [&](absl::string_view event) { events.emplace_back(event); });
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(nlohmann::json::accept(events[0]));
}

TEST(HostTraceJsonTest, NamesThreadsAndHelperProcesses) {
  HostCapture capture;
  capture.roots = {10};
  capture.threads = {{10, 10, 0, "python", "python"},
                     {10, 11, 0, "pt_autograd_0", "python"},
                     {20, 20, 0, "pt_data_worker", "pt_data_worker"},
                     {20, 21, 0, "", ""}};
  NamedFrames names;
  std::vector<nlohmann::json> events;
  WriteHostContextEvents(capture, {}, &names, 0, [&](absl::string_view event) {
    events.push_back(nlohmann::json::parse(event));
  });
  ASSERT_EQ(events.size(), 4u);
  for (const auto& event : events) EXPECT_EQ(event.at("ph"), "M");
  EXPECT_EQ(events[0].at("name"), "thread_name");
  EXPECT_EQ(events[0].at("args").at("name"), "python");
  EXPECT_EQ(events[1].at("tid"), 11);
  // The traced process (a root) is named by its own trace; its helper here.
  EXPECT_EQ(events[2].at("name"), "process_name");
  EXPECT_EQ(events[2].at("pid"), 20);
  EXPECT_EQ(events[2].at("args").at("name"), "pt_data_worker");
  EXPECT_EQ(events[3].at("name"), "thread_name");
  EXPECT_EQ(events[3].at("tid"), 20);
}

}  // namespace
}  // namespace gpuctl::hostctx
