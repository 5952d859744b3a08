// Replays the seed corpus (test/fuzz_corpus/analysis) and seeded random
// mutations of it, as JSON and as gzip, plus the kineto fixture, through the
// reader and every diagnosis: nothing may crash (run under ASan/UBSan in
// CI), every refusal is INVALID_ARGUMENT, and whatever is read renders to
// valid JSON (the target aborts otherwise).
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "daemon/analysis/testing/trace_builder.h"
#include "daemon/analysis/trace_reader.h"
#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace gpuctl::analysis {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> LoadCorpus() {
  std::vector<std::string> corpus;
  for (const auto& entry : fs::directory_iterator(GPUCTL_ANALYSIS_CORPUS_DIR)) {
    if (entry.is_regular_file()) corpus.push_back(ReadFile(entry.path()));
  }
  return corpus;
}

int FuzzOne(const std::string& s) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());  // NOLINT
}

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
                                            "\"dur\"",
                                            "\"X\"",
                                            "null",
                                            "-1",
                                            "1e999",
                                            "-9e12",
                                            "1.0005",
                                            "18446744073709551616",
                                            "\"cat\"",
                                            "\"kernel\"",
                                            "\"args\"",
                                            "\"stream\"",
                                            "\"correlation\"",
                                            "\"cuda_runtime\"",
                                            "\"cudaLaunchKernel\"",
                                            "\"ProfilerStep#7\"",
                                            "\"gpuctl\"",
                                            "\"traceEvents\"",
                                            "\xff",
                                            "\\u0000"};
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

bool IsGzip(const std::string& s) {
  return s.size() >= 2 && static_cast<unsigned char>(s[0]) == 0x1f &&
         static_cast<unsigned char>(s[1]) == 0x8b;
}

TEST(TraceReaderFuzzTest, CorpusIsPresentAndMostlyReadable) {
  std::vector<std::string> corpus = LoadCorpus();
  ASSERT_GE(corpus.size(), 4u);
  int read = 0;
  for (const std::string& seed : corpus) {
    EXPECT_EQ(FuzzOne(seed), 0);
    read += ReadTraceBytes(seed, "seed").ok();
  }
  EXPECT_GE(read, 4);
}

TEST(TraceReaderFuzzTest, MutationsNeverCrash) {
  std::vector<std::string> corpus = LoadCorpus();
  corpus.push_back(ReadFile(fs::path(GPUCTL_KINETO_FIXTURE_DIR) / "torch_profiler_cpu.json"));
  std::mt19937_64 gen(20261205);
  size_t read = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    // The large real trace is mutated less often: it is slow to parse.
    size_t pick = iter % 50 == 0 ? corpus.size() - 1 : iter % (corpus.size() - 1);
    std::string s = corpus[pick];
    // Mutations of gzip bytes test the inflater; of the JSON inside, the
    // parser behind it.
    if (IsGzip(s) && iter % 2 == 0) {
      Mutate(&s, gen);
    } else {
      if (IsGzip(s)) {
        absl::StatusOr<TraceModel> unused = ReadTraceBytes(s, "seed");
        (void)unused;
        continue;
      }
      Mutate(&s, gen);
      if (iter % 3 == 0) s = testing::GzipMembers(s, 1 + static_cast<int>(gen() % 3));
    }
    ASSERT_EQ(FuzzOne(s), 0);
    read += ReadTraceBytes(s, "mutant").ok();
  }
  EXPECT_GT(read, 0u);
}

}  // namespace
}  // namespace gpuctl::analysis
