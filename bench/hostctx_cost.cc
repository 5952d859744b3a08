// The cost of host context (daemon/hostctx) on a busy process, in one run:
// a forked workload does fixed rounds of CPU work with a 24-frame call
// chain, once unsampled and once under the sampler at each frequency, in
// interleaved repetitions; the figure is each sampled run's round time
// against the unsampled runs'. A round's time is the workload thread's own
// CPU time (CLOCK_THREAD_CPUTIME_ID), which holds the kernel's work for its
// samples and switch records and not the waits a loaded machine adds. The sampler's own CPU
// (draining the rings every 100 ms) and the symbolization and JSON conversion of what it took are
// measured per 1000 samples, with the JSON bytes per second sampled. A
// rate written with a `d` (`99d`) also copies 8 KiB of user stack and the
// registers with each sample and unwinds them with DWARF call-frame
// information (SamplerOptions::dwarf_unwind), so the conversion's figure
// holds the unwinding. A rate written with an `s` (`0s`, `99s`) makes the
// workload sleep 1 ms after each round's work, timed as part of the round
// (its CPU time holds the switch-out), and, when sampled, records a stack
// at every switch-out and CPU-wide switch events (the `sched` activity's
// switch stacks and preemptor names); its ratio is against the `0s` run.
// Last, what keeping process images costs (HostCapture::images): a child
// maps kImageMappings pages of a file executable, unsampled and sampled
// (each mmap then writes a record), then the sampler's snapshot of a
// process with that many mappings and the symbolizer's replay of them.
//
//   gpuctl_hostctx_cost_bench [ROUNDS] [REPS] [HZ[d|s]...]   default 400 3 99 999
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/common/clock.h"
#include "daemon/hostctx/host_trace_json.h"
#include "daemon/hostctx/off_cpu.h"
#include "daemon/hostctx/process_image.h"
#include "daemon/hostctx/sampler.h"
#include "daemon/hostctx/symbolizer.h"

namespace {

int64_t NowNs(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

__attribute__((noinline)) uint64_t Work(uint64_t rounds) {
  volatile uint64_t acc = 1;
  for (uint64_t i = 0; i < rounds; ++i) acc = acc * 6364136223846793005ULL + i;
  return acc;
}

// A call chain of `depth` frames above Work.
__attribute__((noinline)) uint64_t Nest(int depth, uint64_t rounds) {
  if (depth == 0) return Work(rounds);
  const uint64_t r = Nest(depth - 1, rounds);
  asm volatile("" ::: "memory");  // not a tail call
  return r;
}

constexpr int kDepth = 22;

uint64_t IterationsForMs(double ms) {
  const uint64_t probe = 2000000;
  const int64_t start = NowNs(CLOCK_THREAD_CPUTIME_ID);
  Nest(kDepth, probe);
  const double ns = static_cast<double>(NowNs(CLOCK_THREAD_CPUTIME_ID) - start);
  return static_cast<uint64_t>(static_cast<double>(probe) * ms * 1e6 / ns);
}

struct RunResult {
  std::vector<double> round_ms;
  size_t samples = 0;
  double start_cpu_ms = 0;    // Start: listing threads and descendants, opening events
  double sampler_cpu_ms = 0;  // polls and Stop
  double convert_cpu_ms = 0;  // symbols, off-CPU intervals, JSON
  size_t json_bytes = 0;
  double window_s = 0;
  uint64_t lost = 0;
  size_t switches = 0, switch_stacks = 0;
};

struct Mode {
  int hz = 0;  // 0: unsampled
  bool dwarf = false;
  bool sleeps = false;  // a 1 ms sleep per round; switch stacks when sampled
};

// Runs the workload in a child; samples it at `mode.hz` unless 0.
RunResult Run(int rounds, uint64_t iterations, Mode mode) {
  const int hz = mode.hz;
  auto* shared = static_cast<double*>(mmap(nullptr, sizeof(double) * rounds, PROT_READ | PROT_WRITE,
                                           MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  int ready[2];
  if (pipe(ready) != 0) std::abort();
  const pid_t child = fork();
  if (child == 0) {
    char go = 0;
    if (read(ready[0], &go, 1) != 1) _exit(1);
    for (int i = 0; i < rounds; ++i) {
      const int64_t start = NowNs(CLOCK_THREAD_CPUTIME_ID);
      Nest(kDepth, iterations);
      if (mode.sleeps) {
        const timespec ms{0, 1000000};
        nanosleep(&ms, nullptr);
      }
      shared[i] = static_cast<double>(NowNs(CLOCK_THREAD_CPUTIME_ID) - start) / 1e6;
    }
    _exit(0);
  }
  RunResult result;
  gpuctl::RealClock clock;
  gpuctl::hostctx::SamplerOptions options;
  options.frequency_hz = hz;
  options.dwarf_unwind = mode.dwarf;
  options.switch_stacks = mode.sleeps;
  options.cpu_wide_switches = mode.sleeps;
  gpuctl::hostctx::HostSampler sampler(options, &clock);
  gpuctl::hostctx::Symbolizer symbolizer;
  int64_t cpu = NowNs(CLOCK_THREAD_CPUTIME_ID);
  if (hz > 0) {
    const absl::Status started = sampler.Start({child});
    if (!started.ok()) {
      std::fprintf(stderr, "hostctx_cost: %s\n", std::string(started.message()).c_str());
      std::exit(2);
    }
  }
  result.start_cpu_ms = static_cast<double>(NowNs(CLOCK_THREAD_CPUTIME_ID) - cpu) / 1e6;
  cpu = NowNs(CLOCK_THREAD_CPUTIME_ID);
  if (hz > 0) symbolizer.LoadProcess(child);
  const double load_cpu = static_cast<double>(NowNs(CLOCK_THREAD_CPUTIME_ID) - cpu);
  double idle_cpu = 0;
  if (write(ready[1], "g", 1) != 1) std::abort();
  int status = 0;
  const timespec nap{0, 100000000};
  while (waitpid(child, &status, WNOHANG) == 0) {
    nanosleep(&nap, nullptr);
    const int64_t poll_start = NowNs(CLOCK_THREAD_CPUTIME_ID);
    if (hz > 0) sampler.Poll();
    idle_cpu += static_cast<double>(NowNs(CLOCK_THREAD_CPUTIME_ID) - poll_start);
  }
  if (hz > 0) {
    const int64_t stop_start = NowNs(CLOCK_THREAD_CPUTIME_ID);
    const gpuctl::hostctx::HostCapture capture = sampler.Stop();
    idle_cpu += static_cast<double>(NowNs(CLOCK_THREAD_CPUTIME_ID) - stop_start);
    result.sampler_cpu_ms = idle_cpu / 1e6;
    result.samples = capture.samples.size();
    result.switches = capture.switches.size();
    result.switch_stacks = capture.switch_stacks.size();
    result.lost = capture.lost_records + capture.dropped_samples;
    result.window_s = static_cast<double>(capture.stop_ns - capture.start_ns) / 1e9;
    cpu = NowNs(CLOCK_THREAD_CPUTIME_ID);
    const auto off_cpu =
        gpuctl::hostctx::OffCpuIntervals(capture.switches, capture.start_ns, capture.stop_ns);
    result.json_bytes =
        gpuctl::hostctx::HostContextTraceJson(capture, off_cpu, &symbolizer, capture.start_ns)
            .size();
    result.convert_cpu_ms =
        (load_cpu + static_cast<double>(NowNs(CLOCK_THREAD_CPUTIME_ID) - cpu)) / 1e6;
  }
  result.round_ms.assign(shared, shared + rounds);
  munmap(shared, sizeof(double) * rounds);
  close(ready[0]);
  close(ready[1]);
  return result;
}

std::string ModeName(const Mode& mode) {
  std::string name = mode.hz == 0 ? "none" : std::to_string(mode.hz) + " Hz";
  if (mode.dwarf) name += " + DWARF";
  if (mode.sleeps) name += mode.hz == 0 ? ", 1 ms sleeps" : " + switch stacks, 1 ms sleeps";
  return name;
}

constexpr int kImageMappings = 2000;

struct ImageCost {
  double ns_per_mmap = 0;
  size_t mappings_kept = 0;
  double snapshot_ms = 0;  // SnapshotProcess of the child, its mappings made
  double replay_ms = 0;    // a Symbolizer's first lookup in its image
};

// A child that maps kImageMappings pages of its own executable (at file
// offset 0 each, so none merges with its neighbour), sampled at 99 Hz when
// `sampled`.
ImageCost MeasureImages(bool sampled) {
  auto* shared = static_cast<double*>(
      mmap(nullptr, sizeof(double), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  int go[2];
  int done[2];
  if (pipe(go) != 0 || pipe(done) != 0) std::abort();
  const pid_t child = fork();
  if (child == 0) {
    const int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    char byte = 0;
    if (fd < 0 || read(go[0], &byte, 1) != 1) _exit(1);
    const int64_t start = NowNs(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < kImageMappings; ++i) {
      if (mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED) _exit(1);
    }
    *shared = static_cast<double>(NowNs(CLOCK_THREAD_CPUTIME_ID) - start) / kImageMappings;
    if (write(done[1], "d", 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  ImageCost cost;
  gpuctl::RealClock clock;
  gpuctl::hostctx::HostSampler sampler(gpuctl::hostctx::SamplerOptions{}, &clock);
  if (sampled && !sampler.Start({child}).ok()) std::exit(2);
  char byte = 0;
  if (write(go[1], "g", 1) != 1 || read(done[0], &byte, 1) != 1) std::abort();
  cost.ns_per_mmap = *shared;
  if (sampled) {
    sampler.Poll();
    std::vector<std::shared_ptr<const gpuctl::UniqueFd>> roots;
    const int64_t start = NowNs(CLOCK_THREAD_CPUTIME_ID);
    uint64_t first = 0;
    for (int i = 0; i < 10; ++i) {
      const gpuctl::hostctx::ProcessImage image =
          gpuctl::hostctx::SnapshotProcess("/proc", child, 0, size_t{1} << 17, &roots);
      first = image.changes.empty() ? 0 : image.changes[0].mappings.at(0).start;
    }
    cost.snapshot_ms = static_cast<double>(NowNs(CLOCK_THREAD_CPUTIME_ID) - start) / 10 / 1e6;
    gpuctl::hostctx::HostCapture capture = sampler.Stop();
    // Gone, as a short worker is when its frames are named.
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    for (const auto& image : capture.images) {
      for (const auto& change : image.second.changes) cost.mappings_kept += change.mappings.size();
    }
    const int64_t replay = NowNs(CLOCK_THREAD_CPUTIME_ID);
    gpuctl::hostctx::Symbolizer symbolizer("/proc", std::move(capture.images));
    symbolizer.Symbolize(child, 0, first, false);
    cost.replay_ms = static_cast<double>(NowNs(CLOCK_THREAD_CPUTIME_ID) - replay) / 1e6;
  }
  if (!sampled) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
  for (int fd : {go[0], go[1], done[0], done[1]}) close(fd);
  munmap(shared, sizeof(double));
  return cost;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 400;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  std::vector<Mode> modes = {Mode{}};
  for (int i = 3; i < argc; ++i) {
    modes.push_back(Mode{std::atoi(argv[i]), std::strchr(argv[i], 'd') != nullptr,
                         std::strchr(argv[i], 's') != nullptr});
  }
  if (modes.size() == 1) modes.insert(modes.end(), {Mode{99, false}, Mode{999, false}});
  const uint64_t iterations = IterationsForMs(5.0);
  std::vector<RunResult> merged(modes.size());
  for (int rep = 0; rep < reps; ++rep) {
    for (size_t m = 0; m < modes.size(); ++m) {
      RunResult r = Run(rounds, iterations, modes[m]);
      RunResult& into = merged[m];
      into.round_ms.insert(into.round_ms.end(), r.round_ms.begin(), r.round_ms.end());
      into.samples += r.samples;
      into.start_cpu_ms += r.start_cpu_ms;
      into.sampler_cpu_ms += r.sampler_cpu_ms;
      into.convert_cpu_ms += r.convert_cpu_ms;
      into.json_bytes += r.json_bytes;
      into.window_s += r.window_s;
      into.lost += r.lost;
      into.switches += r.switches;
      into.switch_stacks += r.switch_stacks;
    }
  }
  const double base = Percentile(merged[0].round_ms, 0.5);
  double sleeping_base = base;
  for (size_t m = 0; m < modes.size(); ++m) {
    if (modes[m].sleeps && modes[m].hz == 0) sleeping_base = Percentile(merged[m].round_ms, 0.5);
  }
  std::printf("%d rounds x %d reps, call chain %d frames, round ~5 ms of CPU (thread CPU time)\n",
              rounds, reps, kDepth + 3);
  std::printf(
      "| sampling | p50 ms | p90 ms | p99 ms | × unsampled (p50) | samples | lost |"
      " Start CPU ms | drain CPU ms / 1000 samples | symbols+JSON ms / 1000 samples |"
      " JSON KiB / s sampled |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (size_t m = 0; m < modes.size(); ++m) {
    const RunResult& r = merged[m];
    const double per_k = r.samples > 0 ? 1000.0 / static_cast<double>(r.samples) : 0;
    std::printf("| %s | %.3f | %.3f | %.3f | %.4f | %zu | %llu | %.2f | %.2f | %.2f | %.1f |\n",
                ModeName(modes[m]).c_str(), Percentile(r.round_ms, 0.5),
                Percentile(r.round_ms, 0.9), Percentile(r.round_ms, 0.99),
                Percentile(r.round_ms, 0.5) / (modes[m].sleeps ? sleeping_base : base), r.samples,
                static_cast<unsigned long long>(r.lost),  // NOLINT(google-runtime-int)
                r.start_cpu_ms / reps, r.sampler_cpu_ms * per_k, r.convert_cpu_ms * per_k,
                r.window_s > 0 ? static_cast<double>(r.json_bytes) / 1024.0 / r.window_s : 0.0);
  }
  for (size_t m = 0; m < modes.size(); ++m) {
    const RunResult& r = merged[m];
    if (!modes[m].sleeps || modes[m].hz == 0) continue;
    std::printf("%s: %zu switch records, %zu switch-out stacks, %.1f KiB JSON / s sampled\n",
                ModeName(modes[m]).c_str(), r.switches, r.switch_stacks,
                r.window_s > 0 ? static_cast<double>(r.json_bytes) / 1024.0 / r.window_s : 0.0);
  }
  std::vector<double> unsampled;
  std::vector<double> sampled;
  ImageCost image;
  for (int rep = 0; rep < reps; ++rep) {
    unsampled.push_back(MeasureImages(false).ns_per_mmap);
    image = MeasureImages(true);
    sampled.push_back(image.ns_per_mmap);
  }
  std::printf(
      "process images: %d executable mmaps, %.2f us each unsampled, %.2f us sampled (p50 of %d); "
      "%zu mappings kept (maps snapshot and records); snapshot of the process %.2f ms CPU, "
      "replay and first lookup %.2f ms CPU\n",
      kImageMappings, Percentile(unsampled, 0.5) / 1e3, Percentile(sampled, 0.5) / 1e3, reps,
      image.mappings_kept, image.snapshot_ms, image.replay_ms);
  return 0;
}
