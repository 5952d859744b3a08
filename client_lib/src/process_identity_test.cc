#include "client_lib/src/process_identity.h"

#include <gtest/gtest.h>

#include <map>

#include "client_lib/src/runtime.h"

namespace gpuctl::client {
namespace {

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(ProcessIdentityTest, ParsesRanks) {
  EXPECT_EQ(ParseRankValue("0"), 0);
  EXPECT_EQ(ParseRankValue("17"), 17);
  EXPECT_EQ(ParseRankValue(std::nullopt), -1);
  EXPECT_EQ(ParseRankValue(""), -1);
  EXPECT_EQ(ParseRankValue("-1"), -1);
  EXPECT_EQ(ParseRankValue("3x"), -1);
  EXPECT_EQ(ParseRankValue(" 3"), -1);
  EXPECT_EQ(ParseRankValue("2147483647"), 2147483647);
  EXPECT_EQ(ParseRankValue("2147483648"), -1);
  EXPECT_EQ(ParseRankValue("99999999999999"), -1);
}

TEST(ProcessIdentityTest, SplitsCmdline) {
  using V = std::vector<std::string>;
  EXPECT_EQ(SplitCmdline(std::string("python\0train.py\0--lr\0", 21), 1000),
            (V{"python", "train.py", "--lr"}));
  EXPECT_EQ(SplitCmdline(std::string("a\0\0b", 4), 1000), (V{"a", "", "b"}));
  EXPECT_EQ(SplitCmdline("", 1000), V{});
  EXPECT_EQ(SplitCmdline(std::string("abcdef\0gh", 9), 4), (V{"abcd"}));
}

TEST(ProcessIdentityTest, JobIdFallsBackInOrder) {
  EXPECT_EQ(
      BuildHello(FakeEnv({{"SLURM_JOB_ID", "s"}, {"TORCHELASTIC_RUN_ID", "t"}}), "/proc").job_id,
      "s");
  EXPECT_EQ(BuildHello(FakeEnv({{"TORCHELASTIC_RUN_ID", "t"}}), "/proc").job_id, "t");
  EXPECT_EQ(BuildHello(FakeEnv({}), "/proc").job_id, "");
  const wire::Hello hello =
      BuildHello(FakeEnv({{"WORLD_SIZE", "8"}, {"LOCAL_RANK", "2"}}), "/nonexistent");
  EXPECT_EQ(hello.world_size, 8);
  EXPECT_EQ(hello.local_rank, 2);
  EXPECT_EQ(hello.rank, -1);
  EXPECT_TRUE(hello.cmdline.empty());  // unreadable proc root: no crash
}

TEST(ProcessIdentityTest, RuntimeOptionsFromEnv) {
  AgentOptions defaults = Runtime::OptionsFromEnv(FakeEnv({}));
  EXPECT_EQ(defaults.socket_path, "/run/gpuctl/gpuctl.sock");
  EXPECT_FALSE(defaults.force_inline);
  AgentOptions set = Runtime::OptionsFromEnv(
      FakeEnv({{"GPUCTL_SOCKET", "/tmp/x.sock"}, {"GPUCTL_FORCE_INLINE", "1"}}));
  EXPECT_EQ(set.socket_path, "/tmp/x.sock");
  EXPECT_TRUE(set.force_inline);
}

}  // namespace
}  // namespace gpuctl::client
