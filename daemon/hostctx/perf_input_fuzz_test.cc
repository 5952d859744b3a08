// Replays test/fuzz_corpus/hostctx and seeded mutations of it through the
// ring-buffer and perf-map target (perf_input_fuzz_target.cc).
#include <random>
#include <string>
#include <vector>

#include "daemon/common/testing/fuzz_corpus_replay.h"
#include "gtest/gtest.h"

namespace gpuctl::hostctx {
namespace {

TEST(PerfInputFuzzTest, CorpusAndMutationsHoldInvariants) {
  const std::vector<std::string> corpus =
      gpuctl::testing::LoadFuzzCorpus(std::string(GPUCTL_HOSTCTX_CORPUS_DIR));
  ASSERT_GE(corpus.size(), 4u);
  for (const std::string& input : corpus) EXPECT_EQ(gpuctl::testing::RunFuzzInput(input), 0);
  std::mt19937_64 rng(17);
  for (int i = 0; i < 20000; ++i) {
    ASSERT_EQ(gpuctl::testing::RunFuzzInput(gpuctl::testing::MutateFuzzInput(corpus, rng)), 0);
  }
}

}  // namespace
}  // namespace gpuctl::hostctx
