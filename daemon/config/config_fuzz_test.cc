// Replays the seed corpus (test/fuzz_corpus/config) and seeded random
// mutations of it through the parser (config_fuzz_target.cc checks the
// contract): nothing may crash (run under ASan/UBSan in CI), and parsing is
// deterministic.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "daemon/config/daemon_config.h"
#include "daemon/config/testing/expect_options.h"
#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace gpuctl::daemon {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> LoadConfigCorpus() {
  std::vector<std::string> corpus;
  for (const auto& entry : fs::directory_iterator(GPUCTL_CONFIG_CORPUS_DIR)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return corpus;
}

int RunTarget(const std::string& text) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(text.data()),  // NOLINT
                                text.size());
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start + 1));
    start = end + 1;
  }
  return lines;
}

// Byte edits with YAML's punctuation, and line edits (repeat, drop, swap,
// re-indent) that make duplicate keys, misplaced sections and bad nesting.
void MutateConfig(std::string* text, std::mt19937_64& gen) {
  static constexpr char kPunctuation[] = ":-[]{},&*!#|>?'\"\n \t%@`\\0123456789";
  int ops = 1 + static_cast<int>(gen() % 4);
  for (int i = 0; i < ops; ++i) {
    std::vector<std::string> lines = SplitLines(*text);
    size_t at = text->empty() ? 0 : gen() % text->size();
    switch (gen() % 7) {
      case 0:
        if (!text->empty()) (*text)[at] = kPunctuation[gen() % (sizeof(kPunctuation) - 1)];
        break;
      case 1:
        text->insert(at, 1, kPunctuation[gen() % (sizeof(kPunctuation) - 1)]);
        break;
      case 2:
        if (!text->empty()) text->erase(at, 1 + gen() % 8);
        break;
      case 3:
        if (!text->empty()) (*text)[at] = static_cast<char>(gen());
        break;
      default: {
        if (lines.empty()) break;
        size_t a = gen() % lines.size();
        size_t b = gen() % lines.size();
        int op = static_cast<int>(gen() % 4);
        if (op == 0) lines.insert(lines.begin() + static_cast<ptrdiff_t>(b), lines[a]);
        if (op == 1) lines.erase(lines.begin() + static_cast<ptrdiff_t>(a));
        if (op == 2) std::swap(lines[a], lines[b]);
        if (op == 3) lines[a].insert(0, std::string(gen() % 3 * 2, ' '));
        text->clear();
        for (const std::string& line : lines) *text += line;
        break;
      }
    }
  }
}

TEST(ConfigFuzzTest, CorpusIsPresentAndPartlyValid) {
  std::vector<std::string> corpus = LoadConfigCorpus();
  ASSERT_GE(corpus.size(), 6u);
  int accepted = 0;
  for (const std::string& seed : corpus) {
    EXPECT_EQ(RunTarget(seed), 0);
    DaemonOptions options;
    accepted += ParseDaemonConfig(seed, "seed.yaml", &options).ok();
  }
  EXPECT_GE(accepted, 3);
  EXPECT_LT(accepted, static_cast<int>(corpus.size()));
}

TEST(ConfigFuzzTest, MutationsNeverCrashAndParseTheSameTwice) {
  std::vector<std::string> corpus = LoadConfigCorpus();
  ASSERT_FALSE(corpus.empty());
  std::mt19937_64 gen(20240501);
  int accepted = 0;
  for (int iter = 0; iter < 8000; ++iter) {
    std::string text = corpus[static_cast<size_t>(iter) % corpus.size()];
    MutateConfig(&text, gen);
    ASSERT_EQ(RunTarget(text), 0);
    DaemonOptions first, second;
    absl::StatusOr<ConfigLocations> a = ParseDaemonConfig(text, "fuzz.yaml", &first);
    absl::StatusOr<ConfigLocations> b = ParseDaemonConfig(text, "fuzz.yaml", &second);
    ASSERT_EQ(a.status(), b.status()) << text;
    if (!a.ok()) continue;
    ++accepted;
    testing::ExpectSameOptions(first, second);
  }
  // Some mutations (in values, comments or blank space) keep a file valid.
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace gpuctl::daemon
