// Replays test/fuzz_corpus/step_page and seeded mutations of it through the
// step counter page target (step_page_fuzz_target.cc): each input is mapped
// through a real sealed memfd, and the invariants abort on violation.
#include <random>
#include <string>
#include <vector>

#include "daemon/common/testing/fuzz_corpus_replay.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

TEST(StepPageFuzzTest, CorpusAndMutationsHoldInvariants) {
  const std::vector<std::string> corpus =
      testing::LoadFuzzCorpus(std::string(GPUCTL_STEP_PAGE_CORPUS_DIR));
  ASSERT_GE(corpus.size(), 5u);
  for (const std::string& input : corpus) EXPECT_EQ(testing::RunFuzzInput(input), 0);
  std::mt19937_64 rng(3);
  for (int i = 0; i < 5000; ++i) {
    ASSERT_EQ(testing::RunFuzzInput(testing::MutateFuzzInput(corpus, rng)), 0);
  }
}

}  // namespace
}  // namespace gpuctl::daemon
