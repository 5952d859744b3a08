#include "daemon/metrics/process_collector.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace gpuctl::daemon::metrics {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class FakeProc {
 public:
  FakeProc() {
    std::string tmpl = (fs::temp_directory_path() / "gpuctl-proc-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
    fs::create_directories(root_ + "/self/fd");
  }
  ~FakeProc() { fs::remove_all(root_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(root_ + "/" + name) << text;
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

// Fields 3..24 of a stat line: utime 250, stime 150, starttime 1000 ticks.
constexpr char kStat[] =
    "4242 (gpu ctld (x)) S 1 4242 4242 0 -1 4194560 500 0 0 0 250 150 0 0 20 0 9 0 1000 "
    "123456789 2000 18446744073709551615\n";
constexpr char kStatus[] =
    "Name:\tgpuctld\nUmask:\t0022\nState:\tS (sleeping)\nVmSize:\t  204800 kB\n"
    "VmRSS:\t   10240 kB\nThreads:\t9\n";

TEST(ProcessCollectorTest, ReadsCpuMemoryThreadsFdsAndStartTime) {
  FakeProc proc;
  proc.Write("self/stat", kStat);
  proc.Write("self/status", kStatus);
  proc.Write("stat", "cpu  1 2 3\nbtime 1700000000\nprocesses 5\n");
  proc.Write("self/fd/0", "");
  proc.Write("self/fd/1", "");
  absl::StatusOr<ProcessStats> stats = ReadProcessStats(proc.root(), 100);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_DOUBLE_EQ(stats->cpu_seconds, 4.0);
  EXPECT_DOUBLE_EQ(stats->resident_bytes, 10240.0 * 1024);
  EXPECT_DOUBLE_EQ(stats->virtual_bytes, 204800.0 * 1024);
  EXPECT_DOUBLE_EQ(stats->threads, 9);
  EXPECT_DOUBLE_EQ(stats->open_fds, 2);
  EXPECT_DOUBLE_EQ(stats->start_time_seconds, 1700000010.0);
}

TEST(ProcessCollectorTest, MalformedProcIsAnErrorAndNoSamples) {
  FakeProc proc;
  proc.Write("self/stat", "4242 gpuctld S 1\n");
  proc.Write("self/status", kStatus);
  EXPECT_FALSE(ReadProcessStats(proc.root(), 100).ok());
  proc.Write("self/stat", kStat);
  proc.Write("self/status", "Name:\tgpuctld\nVmRSS:\t lots kB\n");
  EXPECT_FALSE(ReadProcessStats(proc.root(), 100).ok());
  EXPECT_TRUE(ProcessCollector(proc.root()).Collect().empty());
}

TEST(ProcessCollectorTest, TheRealProcReportsThisProcess) {
  // Burn a little CPU so the counter is above zero.
  volatile uint64_t sink = 0;
  for (uint64_t i = 0; i < 50'000'000; ++i) sink = sink + i;
  absl::StatusOr<ProcessStats> stats = ReadProcessStats("/proc", sysconf(_SC_CLK_TCK));
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GT(stats->cpu_seconds, 0);
  EXPECT_GT(stats->resident_bytes, 1 << 20);
  EXPECT_GE(stats->open_fds, 3);
  EXPECT_GT(stats->start_time_seconds, 1.6e9);
  const std::string text = prometheus::TextSerializer().Serialize(ProcessCollector().Collect());
  EXPECT_THAT(text, HasSubstr("# TYPE process_cpu_seconds_total counter"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_resident_memory_bytes gauge"));
}

}  // namespace
}  // namespace gpuctl::daemon::metrics
