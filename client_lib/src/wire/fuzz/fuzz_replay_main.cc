// Stand-in for libFuzzer's driver where it is unavailable (GCC builds): runs
// LLVMFuzzerTestOneInput on every file of a corpus directory, then on
// `mutations` deterministic mutations of them. A property violation aborts,
// which CTest reports as a failure.
//
//   wire_decode_fuzz_replay CORPUS_DIR [MUTATIONS] [SEED]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void Run(const std::string& input) {
  const std::vector<uint8_t> bytes(input.begin(), input.end());
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
}

std::string Mutate(const std::vector<std::string>& corpus, std::mt19937_64& rng) {
  const auto below = [&](uint64_t bound) {
    return bound == 0 ? 0 : std::uniform_int_distribution<uint64_t>(0, bound - 1)(rng);
  };
  std::string bytes = corpus[below(corpus.size())];
  const uint64_t edits = 1 + below(6);
  for (uint64_t e = 0; e < edits; ++e) {
    const size_t pos = below(bytes.size());
    switch (below(6)) {
      case 0:
        if (!bytes.empty()) {
          bytes[pos] = static_cast<char>(bytes[pos] ^ (1u << below(8)));
        }
        break;
      case 1:
        if (!bytes.empty()) {
          bytes[pos] = static_cast<char>(below(256));
        }
        break;
      case 2:
        bytes.insert(pos, 1, static_cast<char>(below(256)));
        break;
      case 3:
        if (!bytes.empty()) {
          bytes.erase(pos, 1 + below(4));
        }
        break;
      case 4: {  // splice in a slice of another corpus entry
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [MUTATIONS] [SEED]\n", argv[0]);
    return 2;
  }
  const uint64_t mutations = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 10000;
  const uint64_t seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1;
  std::vector<std::string> corpus;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(argv[1], error)) {
    if (!entry.is_regular_file()) {
      continue;
    }
    std::ifstream in(entry.path(), std::ios::binary);
    corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (error || corpus.empty()) {
    std::fprintf(stderr, "no corpus files in %s\n", argv[1]);
    return 2;
  }
  for (const std::string& input : corpus) {
    Run(input);
  }
  std::mt19937_64 rng(seed);
  for (uint64_t i = 0; i < mutations; ++i) {
    Run(Mutate(corpus, rng));
  }
  std::printf("ran %zu corpus files and %llu mutations\n", corpus.size(),
              static_cast<unsigned long long>(mutations));
  return 0;
}
