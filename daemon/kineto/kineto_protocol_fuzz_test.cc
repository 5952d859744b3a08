// Replays test/fuzz_corpus/kineto and seeded mutations of it through the
// kineto datagram target (kineto_protocol_fuzz_target.cc).
#include <random>
#include <string>
#include <vector>

#include "daemon/common/testing/fuzz_corpus_replay.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

TEST(KinetoProtocolFuzzTest, CorpusAndMutationsHoldInvariants) {
  const std::vector<std::string> corpus =
      testing::LoadFuzzCorpus(std::string(GPUCTL_KINETO_CORPUS_DIR));
  ASSERT_GE(corpus.size(), 4u);
  for (const std::string& input : corpus) EXPECT_EQ(testing::RunFuzzInput(input), 0);
  std::mt19937_64 rng(16);
  for (int i = 0; i < 20000; ++i) {
    ASSERT_EQ(testing::RunFuzzInput(testing::MutateFuzzInput(corpus, rng)), 0);
  }
}

}  // namespace
}  // namespace gpuctl::daemon
