// gpuctl analyze's cost on a synthetic trace in gpuctl's layout, against the
// floor of inflating the same .json.gz alone (zlib's inflate, its CRC-32
// check included, 1 MiB of output at a time), in the same run on one thread:
//
//   gpuctl_analyze_bench [STEPS] [RUNS]
//
// Each step: a step mark, a data-loader range, 200 small kernels and their
// launch calls, 20 larger kernels, an NCCL kernel, an HtoD copy, a memset
// and a stream synchronize with its sync record: 470 events. The JSON is
// compressed in 1 MiB gzip members, as gpuctld stores it. Prints a markdown
// table (p50/p90/p99 over RUNS) and the model's bytes per event.
#include <sys/resource.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/analysis/analyze.h"
#include "daemon/analysis/report.h"
#include "daemon/analysis/testing/trace_builder.h"
#include "daemon/analysis/trace_reader.h"

namespace {

using gpuctl::analysis::testing::TraceBuilder;
namespace analysis = gpuctl::analysis;

constexpr int64_t kUs = 1000;

std::string MakeTrace(int steps) {
  TraceBuilder b;
  b.Gpuctl({.window_start_ns = 0, .window_end_ns = int64_t{steps + 1} * 20'000 * kUs});
  uint64_t corr = 1;
  for (int s = 0; s < steps; ++s) {
    const int64_t t0 = int64_t{s} * 20'000 * kUs;
    b.Step(s, t0, 20'000 * kUs);
    b.Range("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t0, 1'000 * kUs);
    b.Runtime("cudaMemcpyAsync", t0 + 1'000 * kUs, 10 * kUs, corr);
    b.Memcpy("Memcpy HtoD (Pinned -> Device)", t0 + 1'020 * kUs, 200 * kUs, corr++, 16 << 20, 3);
    int64_t t = t0 + 1'300 * kUs;
    for (int k = 0; k < 220; ++k) {
      const int64_t dur = k % 11 == 0 ? 400 * kUs : 6 * kUs;
      b.Runtime("cudaLaunchKernel", t - 20 * kUs, 4 * kUs, corr);
      b.Kernel(k % 11 == 0 ? "ampere_sgemm_128x64_nn" : "vectorized_elementwise_kernel", t, dur,
               corr++);
      t += dur + 3 * kUs;
    }
    b.Runtime("cudaMemsetAsync", t, 5 * kUs, corr);
    b.Memset(t + 10 * kUs, 20 * kUs, corr++, 1 << 20);
    b.Runtime("cudaLaunchKernel", t, 5 * kUs, corr);
    b.Kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 50 * kUs, 3'000 * kUs, corr++, 9);
    b.Runtime("cudaStreamSynchronize", t + 100 * kUs, 3'000 * kUs, corr);
    b.Sync("Stream Sync", t + 100 * kUs, 3'000 * kUs, corr++);
  }
  return b.Json();
}

// zlib's inflate of every gzip member of `gz` (its checks included), the
// output dropped; the number of bytes it gave.
size_t ZlibInflate(const std::string& gz) {
  std::unique_ptr<char[]> out(new char[1 << 20]);
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) std::abort();
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));  // NOLINT: zlib's API
  z.avail_in = static_cast<uInt>(gz.size());
  size_t total = 0;
  while (z.avail_in > 0) {
    z.next_out = reinterpret_cast<Bytef*>(out.get());  // NOLINT: zlib's unsigned bytes
    z.avail_out = 1 << 20;
    const int rc = inflate(&z, Z_NO_FLUSH);
    total += (1 << 20) - z.avail_out;
    if (rc == Z_STREAM_END) {
      inflateReset(&z);
    } else if (rc != Z_OK) {
      std::abort();
    }
  }
  inflateEnd(&z);
  return total;
}

struct Timing {
  std::vector<double> seconds;
  double At(double p) {
    std::sort(seconds.begin(), seconds.end());
    size_t i =
        std::min(seconds.size() - 1, static_cast<size_t>(p * static_cast<double>(seconds.size())));
    return seconds[i];
  }
};

template <typename Fn>
Timing Measure(int runs, Fn fn) {
  Timing t;
  for (int r = 0; r < runs; ++r) {
    auto start = std::chrono::steady_clock::now();
    fn();
    t.seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return t;
}

size_t ModelBytes(const analysis::TraceModel& m) {
  size_t bytes = m.gpu_ops.capacity() * sizeof(analysis::GpuOp) +
                 m.api_calls.capacity() * sizeof(analysis::ApiCall) +
                 m.syncs.capacity() * sizeof(analysis::SyncRecord) +
                 m.ranges.capacity() * sizeof(analysis::HostRange) +
                 m.steps.capacity() * sizeof(analysis::Step);
  for (const std::string& n : m.names) bytes += sizeof(std::string) + n.capacity();
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  const std::string json = MakeTrace(steps);
  const int members = static_cast<int>(json.size() >> 20) + 1;
  const std::string gz = gpuctl::analysis::testing::GzipMembers(json, members);

  absl::StatusOr<analysis::TraceModel> model = analysis::ReadTraceBytes(gz, "bench.json.gz");
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  const uint64_t events = model->info.events;
  std::printf("%d steps: %llu events, %.1f MB of JSON (%.0f B/event), %.1f MB gzip in %d members\n",
              steps, static_cast<unsigned long long>(events),
              static_cast<double>(json.size()) / 1e6,
              static_cast<double>(json.size()) / static_cast<double>(events),
              static_cast<double>(gz.size()) / 1e6, members);
  std::printf("model: %.1f bytes per event\n\n",
              static_cast<double>(ModelBytes(*model)) / static_cast<double>(events));

  Timing inflate = Measure(runs, [&] {
    if (ZlibInflate(gz) != json.size()) std::abort();
  });
  Timing read = Measure(runs, [&] {
    if (!analysis::ReadTraceBytes(gz, "bench.json.gz").ok()) std::abort();
  });
  size_t report_bytes = 0;
  Timing full = Measure(runs, [&] {
    absl::StatusOr<analysis::TraceModel> m = analysis::ReadTraceBytes(gz, "bench.json.gz");
    std::vector<analysis::TraceReport> reports = {analysis::AnalyzeModel(*m, {})};
    std::vector<analysis::Finding> ranked = analysis::RankFindings(reports);
    report_bytes = analysis::RenderText(reports, ranked).size() +
                   analysis::RenderJson(reports, ranked, {}, {}).size();
  });
  const double floor = inflate.At(0.5);
  std::printf("| stage | p50 ms | p90 ms | p99 ms | events/s (p50) | x inflate (p50) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (auto& [name, t] : std::vector<std::pair<const char*, Timing*>>{
           {"floor: zlib inflate alone", &inflate},
           {"read: inflate + parse into the model", &read},
           {"analyze: read + every diagnosis + text and JSON", &full}}) {
    const double p50 = t->At(0.5);
    std::printf("| %s | %.1f | %.1f | %.1f | %.2f M | %.2f |\n", name, p50 * 1e3, t->At(0.9) * 1e3,
                t->At(0.99) * 1e3, static_cast<double>(events) / p50 / 1e6, p50 / floor);
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("\nreport: %zu bytes; peak RSS of the whole run (trace text included): %ld MB\n",
              report_bytes, usage.ru_maxrss / 1024);
  return 0;
}
