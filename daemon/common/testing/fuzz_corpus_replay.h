#ifndef GPUCTL_DAEMON_COMMON_TESTING_FUZZ_CORPUS_REPLAY_H_
#define GPUCTL_DAEMON_COMMON_TESTING_FUZZ_CORPUS_REPLAY_H_

// Drives a libFuzzer entry point from a gtest in builds without libFuzzer:
// the committed seed corpus, then seeded mutations of it. The entry point
// aborts on a broken invariant, which fails the test binary.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace gpuctl::testing {

inline std::vector<std::string> LoadFuzzCorpus(const std::string& dir) {
  std::vector<std::string> corpus;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return corpus;
}

inline int RunFuzzInput(const std::string& input) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()),  // NOLINT
                                input.size());
}

// One to four byte edits (flip, set, insert, erase, truncate, splice).
inline std::string MutateFuzzInput(const std::vector<std::string>& corpus, std::mt19937_64& rng) {
  const auto below = [&](uint64_t bound) { return bound == 0 ? 0 : rng() % bound; };
  std::string bytes = corpus[below(corpus.size())];
  for (uint64_t e = 0, edits = 1 + below(4); e < edits; ++e) {
    const size_t pos = below(bytes.size());
    switch (below(6)) {
      case 0:
        if (!bytes.empty()) bytes[pos] = static_cast<char>(bytes[pos] ^ (1u << below(8)));
        break;
      case 1:
        if (!bytes.empty()) bytes[pos] = static_cast<char>(below(256));
        break;
      case 2:
        bytes.insert(pos, 1, static_cast<char>(below(256)));
        break;
      case 3:
        if (!bytes.empty()) bytes.erase(pos, 1 + below(4));
        break;
      case 4: {
        const std::string& other = corpus[below(corpus.size())];
        const size_t from = below(other.size() + 1);
        bytes.insert(pos, other.substr(from, below(other.size() - from + 1)));
        break;
      }
      default:
        bytes.resize(below(bytes.size() + 1));
        break;
    }
  }
  return bytes;
}

}  // namespace gpuctl::testing

#endif  // GPUCTL_DAEMON_COMMON_TESTING_FUZZ_CORPUS_REPLAY_H_
