// Replays test/fuzz_corpus/ipc_daemon and seeded mutations of it through the
// daemon-side IPC decoding target (ipc_message_fuzz_target.cc), whose
// invariants abort on violation.
#include <random>
#include <string>
#include <vector>

#include "daemon/common/testing/fuzz_corpus_replay.h"
#include "gpuctl/v1/ipc.pb.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

TEST(IpcMessageFuzzTest, CorpusParsesAndHoldsInvariants) {
  const std::vector<std::string> corpus = testing::LoadFuzzCorpus(GPUCTL_IPC_DAEMON_CORPUS_DIR);
  ASSERT_GE(corpus.size(), 5u);
  int parsed = 0;
  for (const std::string& input : corpus) {
    EXPECT_EQ(testing::RunFuzzInput(input), 0);
    v1::ipc::ClientMessage msg;
    parsed += msg.ParseFromString(input);
  }
  // The seeds are valid messages of every type, not noise.
  EXPECT_EQ(parsed, static_cast<int>(corpus.size()));
}

TEST(IpcMessageFuzzTest, MutationsHoldInvariants) {
  const std::vector<std::string> corpus = testing::LoadFuzzCorpus(GPUCTL_IPC_DAEMON_CORPUS_DIR);
  ASSERT_FALSE(corpus.empty());
  std::mt19937_64 rng(7);
  int parsed = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::string input = testing::MutateFuzzInput(corpus, rng);
    ASSERT_EQ(testing::RunFuzzInput(input), 0);
    v1::ipc::ClientMessage msg;
    parsed += msg.ParseFromString(input);
  }
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace gpuctl::daemon
