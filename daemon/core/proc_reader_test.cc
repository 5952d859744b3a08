#include "daemon/core/proc_reader.h"

#include <fstream>
#include <optional>
#include <string>

#include "daemon/core/testing/fake_proc.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::ElementsAre;

using ::gpuctl::testing::FakeProc;

TEST(ProcReaderTest, ReadsAncestorsFromProcStat) {
  FakeProc proc;
  proc.Add(1, 0, "systemd");
  proc.Add(100, 1, "bash");
  proc.Add(200, 100, "torchrun (elastic) x");  // spaces and parentheses in the name
  proc.Add(300, 200);
  EXPECT_THAT(ReadAncestors(proc.root(), 300), ElementsAre(200, 100, 1));
  EXPECT_THAT(ReadAncestors(proc.root(), 100), ElementsAre(1));
  EXPECT_THAT(ReadAncestors(proc.root(), 1), ElementsAre());
  EXPECT_THAT(ReadAncestors(proc.root(), 999), ElementsAre()) << "unreadable";
  proc.Add(400, 401);  // 401 is gone: the chain stops there
  EXPECT_THAT(ReadAncestors(proc.root(), 400), ElementsAre(401));
  proc.Add(500, 501);  // a cycle cannot loop forever
  proc.Add(501, 500);
  EXPECT_EQ(ReadAncestors(proc.root(), 500).size(), static_cast<size_t>(kMaxAncestors));
  std::ofstream(proc.root() + "/300/stat") << "garbage";
  EXPECT_THAT(ReadAncestors(proc.root(), 300), ElementsAre());
}

TEST(ProcReaderTest, ReadsTheInnermostPidFromNsPid) {
  FakeProc proc;
  proc.Add(4711, 1);
  std::ofstream(proc.root() + "/4711/status") << "Name:\tpython\nNSpid:\t4711\t12\nPPid:\t1\n";
  ProcfsReader reader(proc.root());
  EXPECT_EQ(reader.InnermostPid(4711), 12);
  EXPECT_EQ(reader.ParentPid(4711), 1);
  EXPECT_EQ(reader.InnermostPid(4712), std::nullopt);
  std::ofstream(proc.root() + "/4711/status") << "Name:\tpython\nNSpid:\t\n";
  EXPECT_EQ(reader.InnermostPid(4711), std::nullopt);
}

}  // namespace
}  // namespace gpuctl::daemon
