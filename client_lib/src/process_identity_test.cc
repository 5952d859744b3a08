#include "client_lib/src/process_identity.h"

#include <gtest/gtest.h>

#include <map>

#include "client_lib/src/runtime.h"
#include "client_lib/src/wire/wire_format.h"

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

TEST(ProcessIdentityTest, RanksFallBackToMpiAndSlurmVariables) {
  const wire::Hello ompi = BuildHello(FakeEnv({{"OMPI_COMM_WORLD_RANK", "3"},
                                               {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                               {"OMPI_COMM_WORLD_SIZE", "8"},
                                               {"SLURM_PROCID", "7"}}),
                                      "/proc");
  EXPECT_EQ(ompi.rank, 3);
  EXPECT_EQ(ompi.local_rank, 1);
  EXPECT_EQ(ompi.world_size, 8);
  const wire::Hello pmi =
      BuildHello(FakeEnv({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}, {"SLURM_LOCALID", "0"}}), "/proc");
  EXPECT_EQ(pmi.rank, 2);
  EXPECT_EQ(pmi.local_rank, 0);
  EXPECT_EQ(pmi.world_size, 4);
  const wire::Hello slurm = BuildHello(
      FakeEnv({{"SLURM_PROCID", "5"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS", "6"}}), "/proc");
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.local_rank, 1);
  EXPECT_EQ(slurm.world_size, 6);
  // RANK wins; a malformed value falls through to the next source.
  const wire::Hello mixed = BuildHello(
      FakeEnv({{"RANK", "0"}, {"SLURM_PROCID", "9"}, {"WORLD_SIZE", "x"}, {"SLURM_NTASKS", "2"}}),
      "/proc");
  EXPECT_EQ(mixed.rank, 0);
  EXPECT_EQ(mixed.world_size, 2);
}

TEST(ProcessIdentityTest, HelloCarriesLabelsAndStepCapabilities) {
  const wire::Hello hello =
      BuildHello(FakeEnv({{"GPUCTL_LABELS", "team=a,bad key=x"}, {"POD_NAME", "p-0"}}), "/proc");
  EXPECT_EQ(hello.labels, (std::vector<std::string>{"team=a", "k8s.pod=p-0"}));
  EXPECT_NE(hello.capabilities & wire::kCapabilityStepWindows, 0u);
  // The agent sets these with the descriptor it sends.
  EXPECT_EQ(hello.capabilities & wire::kCapabilityStepCounter, 0u);
  EXPECT_FALSE(hello.step_counter);
  EXPECT_EQ(hello.protocol_minor, wire::kProtocolMinor);
}

TEST(ProcessIdentityTest, InvalidUtf8FromTheEnvironmentIsReplaced) {
  const wire::Hello hello = BuildHello(FakeEnv({{"GPUCTL_JOB_ID", "job\xff"}}), "/proc");
  EXPECT_TRUE(wire::IsValidUtf8(hello.job_id));
  for (const std::string& arg : hello.cmdline) EXPECT_TRUE(wire::IsValidUtf8(arg));
}

TEST(ProcessIdentityTest, RuntimeOptionsFromEnv) {
  AgentOptions defaults = Runtime::OptionsFromEnv(FakeEnv({}));
  EXPECT_EQ(defaults.socket_path, "/run/gpuctl/gpuctl.sock");
  EXPECT_FALSE(defaults.force_inline);
  AgentOptions set = Runtime::OptionsFromEnv(
      FakeEnv({{"GPUCTL_SOCKET", "/tmp/x.sock"}, {"GPUCTL_FORCE_INLINE", "1"}}));
  EXPECT_EQ(set.socket_path, "/tmp/x.sock");
  EXPECT_TRUE(set.force_inline);
  EXPECT_FALSE(defaults.quiet);
  EXPECT_FALSE(defaults.debug);
  EXPECT_EQ(defaults.unreachable_report_after_ms, 10'000);
  AgentOptions told =
      Runtime::OptionsFromEnv(FakeEnv({{"GPUCTL_QUIET", "1"}, {"GPUCTL_DEBUG", "1"}}));
  EXPECT_TRUE(told.quiet);
  EXPECT_TRUE(told.debug);
}

TEST(ProcessIdentityTest, AttachDelayFromEnvIsBoundedAndDigitsOnly) {
  EXPECT_EQ(Runtime::OptionsFromEnv(FakeEnv({})).attach_delay_ms, 500);
  EXPECT_EQ(Runtime::OptionsFromEnv(FakeEnv({{"GPUCTL_ATTACH_DELAY_MS", "0"}})).attach_delay_ms, 0);
  EXPECT_EQ(Runtime::OptionsFromEnv(FakeEnv({{"GPUCTL_ATTACH_DELAY_MS", "2500"}})).attach_delay_ms,
            2500);
  for (const char* bad : {"-1", "1e3", "60001", "99999999999999999999", " 5", "abc"}) {
    EXPECT_EQ(Runtime::OptionsFromEnv(FakeEnv({{"GPUCTL_ATTACH_DELAY_MS", bad}})).attach_delay_ms,
              500)
        << bad;
  }
}

}  // namespace
}  // namespace gpuctl::client
