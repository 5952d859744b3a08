// Replays the seed corpus (test/fuzz_corpus/records) and seeded random
// mutations of it through the reader and converter: nothing may crash
// (run under ASan/UBSan in CI), and whatever is accepted must convert to
// valid JSON.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

#include "daemon/convert/chrome_trace.h"
#include "daemon/convert/record_reader.h"
#include "daemon/convert/testing/payload_builder.h"
#include "gpuctl/v1/records.h"
#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace gpuctl::daemon {
namespace {

namespace fs = std::filesystem;

std::vector<std::vector<uint8_t>> LoadCorpus() {
  std::vector<std::vector<uint8_t>> corpus;
  for (const auto& entry : fs::directory_iterator(GPUCTL_RECORDS_CORPUS_DIR)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return corpus;
}

std::vector<uint8_t> BuilderSeed() {
  constexpr int64_t kStart = 1704067200'000'000'000;
  testing::PayloadBuilder b(77, kStart, kStart + 1'000'000'000);
  b.AddThreadName(1, "main");
  b.AddRange(1, kStart + 10, kStart + 20, "a\xff\"b", 0, 1);
  b.AddRange(2, kStart + 15, kStart + 25, "nested", 1, 2);
  b.AddStep(1, kStart + 5, 1);
  b.AddStep(1, kStart + 50, 2);
  b.AddRawRecord(77, {1, 2, 3, 4, 5});
  return b.Build();
}

// Every GPU kind, linked the way a real capture links them.
std::vector<uint8_t> GpuSeed() {
  constexpr int64_t kStart = 1704067200'000'000'000;
  testing::PayloadBuilder b(77, kStart, kStart + 1'000'000'000);
  b.AddRange(1, kStart + 10, kStart + 900, "step", 0, 4);
  b.AddDeviceInfo({.device = 0});
  b.AddApiCall(
      {.correlation = 9, .pid = 77, .tid = 1, .start_ns = kStart + 20, .end_ns = kStart + 30});
  b.AddExternalCorrelation(records::kExternalKindGpuctlRange, 9, 4);
  b.AddKernel({.correlation = 9,
               .start_ns = kStart + 40,
               .end_ns = kStart + 80,
               .grid = {64, 2, 1},
               .block = {128, 1, 1},
               .registers_per_thread = 40,
               .static_shared_memory = 4096});
  b.AddMemcpy({.correlation = 10, .start_ns = kStart + 90, .end_ns = kStart + 95, .bytes = 4096});
  b.AddMemset({.correlation = 11, .start_ns = kStart + 96, .end_ns = kStart + 99, .bytes = 64});
  b.AddSync({.correlation = 12, .start_ns = kStart + 100, .end_ns = kStart + 120});
  b.AddMarker({.pid = 77,
               .tid = 1,
               .marker_id = 1,
               .start_ns = kStart + 5,
               .end_ns = kStart + 500,
               .name = "nvtx",
               .domain = "d"});
  b.AddOverhead({.start_ns = kStart + 1, .end_ns = kStart + 2});
  b.AddCaptureInfo({.dropped_by_cupti = 1});
  return b.Build();
}

void Mutate(std::vector<uint8_t>* p, std::mt19937_64& gen) {
  static constexpr uint64_t kInteresting[] = {0,
                                              1,
                                              3,
                                              4,
                                              95,
                                              96,
                                              97,
                                              0x7f,
                                              0x80,
                                              0xff,
                                              0xffff,
                                              0x7fffffff,
                                              0xffffffff,
                                              ~uint64_t{0},
                                              uint64_t{1} << 63};
  int ops = 1 + static_cast<int>(gen() % 4);
  for (int i = 0; i < ops && !p->empty(); ++i) {
    size_t at = gen() % p->size();
    switch (gen() % 6) {
      case 0:
        (*p)[at] ^= static_cast<uint8_t>(1u << (gen() % 8));
        break;
      case 1:
        (*p)[at] = static_cast<uint8_t>(gen());
        break;
      case 2:
        p->resize(gen() % (p->size() + 1));
        break;
      case 3: {
        // Overwrite an aligned header or record field with an edge value.
        size_t width = size_t{1} << (1 + gen() % 3);
        at &= ~(width - 1);
        uint64_t v = kInteresting[gen() % std::size(kInteresting)];
        for (size_t k = 0; k < width && at + k < p->size(); ++k) {
          (*p)[at + k] = static_cast<uint8_t>(v >> (8 * k));
        }
        break;
      }
      case 4:
        p->insert(p->begin() + static_cast<ptrdiff_t>(at), static_cast<uint8_t>(gen()));
        break;
      default:
        p->erase(p->begin() + static_cast<ptrdiff_t>(at));
        break;
    }
  }
}

TEST(RecordReaderFuzzTest, CorpusIsPresentAndValid) {
  auto corpus = LoadCorpus();
  ASSERT_GE(corpus.size(), 3u);
  int accepted = 0;
  for (const auto& seed : corpus) {
    EXPECT_EQ(LLVMFuzzerTestOneInput(seed.data(), seed.size()), 0);
    RecordReaderOptions options;
    if (seed.size() >= 92) options.expected_pid = seed[88] | (seed[89] << 8);
    accepted += ReadRecords(seed, options).ok();
  }
  EXPECT_GE(accepted, 3);
}

TEST(RecordReaderFuzzTest, MutationsNeverCrash) {
  auto corpus = LoadCorpus();
  corpus.push_back(BuilderSeed());
  corpus.push_back(GpuSeed());
  std::mt19937_64 gen(20240101);
  size_t accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> p = corpus[iter % corpus.size()];
    Mutate(&p, gen);
    EXPECT_EQ(LLVMFuzzerTestOneInput(p.data(), p.size()), 0);
    RecordReaderOptions options;
    options.expected_pid = 77;
    auto r = ReadRecords(p, options);
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      continue;
    }
    ++accepted;
    for (const RangeRecord& range : r->ranges) {
      ASSERT_LT(range.name, r->strings.size());
      ASSERT_LE(range.start_ns, range.end_ns);
    }
    for (const ThreadNameRecord& t : r->thread_names) ASSERT_LT(t.name, r->strings.size());
    for (const KernelRecord& k : r->kernels) {
      ASSERT_LT(k.name, r->strings.size());
      ASSERT_LE(k.start_ns, k.end_ns);
      for (int i = 0; i < 3; ++i) ASSERT_GE(k.grid[i], 1);
    }
    for (const ApiCallRecord& a : r->api_calls) ASSERT_LT(a.name, r->strings.size());
    for (const MarkerRecord& m : r->markers) ASSERT_LT(m.domain, r->strings.size());
    for (absl::string_view s : r->strings) {
      ASSERT_GE(reinterpret_cast<const uint8_t*>(s.data()), p.data());  // NOLINT
      ASSERT_LE(reinterpret_cast<const uint8_t*>(s.data()) + s.size(),
                p.data() + p.size());  // NOLINT
    }
  }
  // Some mutations (e.g. in string bytes or ids) keep the payload valid.
  EXPECT_GT(accepted, 0u);
}

}  // namespace
}  // namespace gpuctl::daemon
