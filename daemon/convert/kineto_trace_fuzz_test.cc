// Replays the seed corpus (test/fuzz_corpus/kineto) and seeded random
// mutations of it, plus the real fixture, through the kineto converter:
// nothing may crash (run under ASan/UBSan in CI), every refusal is
// INVALID_ARGUMENT, and whatever is accepted converts to valid JSON (the
// target aborts otherwise).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "daemon/convert/kineto_trace.h"
#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace gpuctl::daemon {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> LoadCorpus() {
  std::vector<std::string> corpus;
  for (const auto& entry : fs::directory_iterator(GPUCTL_KINETO_CORPUS_DIR)) {
    if (entry.is_regular_file()) corpus.push_back(ReadFile(entry.path()));
  }
  return corpus;
}

int FuzzOne(const std::string& s) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());  // NOLINT
}

// JSON-aware mutations: structural characters and edge values are what a
// byte flip rarely produces.
void Mutate(std::string* s, std::mt19937_64& gen) {
  static constexpr const char* kTokens[] = {"{",
                                            "}",
                                            "[",
                                            "]",
                                            ",",
                                            ":",
                                            "\"",
                                            "\\",
                                            "\"ph\"",
                                            "\"ts\"",
                                            "\"M\"",
                                            "\"X\"",
                                            "null",
                                            "-1",
                                            "1e999",
                                            "1.5",
                                            "18446744073709551616",
                                            "\"traceEvents\"",
                                            "\"gpuctl\"",
                                            "\"baseTimeNanoseconds\"",
                                            "\"distributedInfo\"",
                                            "\xff",
                                            "\\u0000",
                                            "\\ud800"};
  int ops = 1 + static_cast<int>(gen() % 4);
  for (int i = 0; i < ops && !s->empty(); ++i) {
    size_t at = gen() % s->size();
    switch (gen() % 5) {
      case 0:
        (*s)[at] = static_cast<char>(gen());
        break;
      case 1:
        s->insert(at, kTokens[gen() % std::size(kTokens)]);
        break;
      case 2:
        s->erase(at, 1 + gen() % 8);
        break;
      case 3:
        s->resize(gen() % (s->size() + 1));
        break;
      default: {
        size_t from = gen() % s->size();
        s->insert(at, s->substr(from, 1 + gen() % 32));
        break;
      }
    }
  }
}

TEST(KinetoTraceFuzzTest, CorpusIsPresentAndMostlyValid) {
  auto corpus = LoadCorpus();
  ASSERT_GE(corpus.size(), 4u);
  int accepted = 0;
  for (const std::string& seed : corpus) {
    EXPECT_EQ(FuzzOne(seed), 0);
    accepted += ConvertKinetoTrace(seed, KinetoTraceTag{}, 1).ok();
  }
  EXPECT_GE(accepted, 3);
}

TEST(KinetoTraceFuzzTest, MutationsNeverCrash) {
  auto corpus = LoadCorpus();
  corpus.push_back(ReadFile(fs::path(GPUCTL_KINETO_FIXTURE_DIR) / "torch_profiler_cpu.json"));
  std::mt19937_64 gen(20261202);
  size_t accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    // The large real trace is mutated less often: it is slow to parse.
    size_t pick = iter % 50 == 0 ? corpus.size() - 1 : iter % (corpus.size() - 1);
    std::string s = corpus[pick];
    Mutate(&s, gen);
    ASSERT_EQ(FuzzOne(s), 0);
    accepted += ConvertKinetoTrace(s, KinetoTraceTag{}, 0).ok();
  }
  // Some mutations (inside strings, of numbers) keep the file valid.
  EXPECT_GT(accepted, 0u);
}

}  // namespace
}  // namespace gpuctl::daemon
