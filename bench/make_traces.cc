// gpuctl_make_traces: synthetic traces of any size, exactly as gpuctld
// stores them, for benchmarks of the readers (gpuctl analyze, Holistic
// Trace Analysis).
//
// Each rank's capture payload (bench/trace_workload.h: training steps with
// kernels, copies, a memset, syncs, NCCL all-reduces, ProfilerStep and
// DataLoader ranges) goes through the daemon's own path, ProcessCapture:
// record reader, Chrome trace converter, gzip (GzipEncoder, one member),
// LocalTraceStore. The trace's manifest is written last, as the daemon
// writes it, so the directory is what `gpuctl trace` leaves in the store:
//   OUT/<trace-id>/node1-rank<r>-pid<p>.json.gz, OUT/<trace-id>/_gpuctl/node1.json
//
// Usage:
//   gpuctl_make_traces --out DIR [--ranks R] [--events E] [--seed S]
//                      [--straggler RANK|-1]
//     E trace events per rank (default 1000000); the last rank is the
//     straggler unless told otherwise. DIR/<trace-id> must not exist.
//     Prints one JSON line per file: {"file", "events", "json_bytes",
//     "gzip_bytes"}, then the directory.
//   gpuctl_make_traces --inflate FILE [--runs N]
//     The floor of reading FILE: zlib's inflate of it alone (1 MiB of
//     output at a time, nothing else done with the bytes), on the calling
//     thread. Prints one JSON line: {"file", "json_bytes", "events",
//     "seconds": [per run, CPU time of the thread], "wall_seconds": [...],
//     "isal_seconds": [...]}, the last the same for ISA-L's inflate, which
//     gpuctl analyze's reader uses (daemon/analysis/trace_input.cc).
#include <isa-l/igzip_lib.h>
#include <time.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "bench/trace_workload.h"
#include "daemon/core/capture_processor.h"
#include "daemon/store/local_store.h"
#include "daemon/store/trace_file_name.h"
#include "gpuctl/v1/manifest.pb.h"

namespace gpuctl::bench {
namespace {

constexpr char kHost[] = "node1";
constexpr char kJob[] = "bench-train";
// A UUIDv7, as the daemon names traces.
constexpr char kTraceId[] = "0190c0de-be0c-7000-8000-00000000b3c4";
constexpr int64_t kWindowStartNs = 1704067200'000'000'000;
constexpr size_t kChunk = size_t{1} << 20;

struct Options {
  std::string out;
  std::string inflate;
  int ranks = 2;
  int64_t events = 1'000'000;
  uint64_t seed = 1;
  int straggler = -2;  // -2: the last rank
  int runs = 1;
};

class OwnedPayload final : public daemon::Payload {
 public:
  explicit OwnedPayload(std::string bytes) : bytes_(std::move(bytes)) {}
  absl::Span<const uint8_t> bytes() const override {
    return {reinterpret_cast<const uint8_t*>(bytes_.data()), bytes_.size()};  // NOLINT
  }

 private:
  std::string bytes_;
};

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

// Inflates `gz` (gzip, any number of members) in kChunk pieces of output,
// handing each to `piece` (null: none); returns the bytes of output, or -1
// when the data is not valid gzip.
template <typename Piece>
int64_t Inflate(const std::string& gz, std::vector<char>* buffer, Piece piece) {
  z_stream zs{};
  if (gz.size() > UINT_MAX) return -1;
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return -1;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));  // NOLINT
  zs.avail_in = static_cast<uInt>(gz.size());
  int64_t total = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END || zs.avail_in > 0) {
    if (rc == Z_STREAM_END && inflateReset(&zs) != Z_OK) break;  // the next member
    zs.next_out = reinterpret_cast<Bytef*>(buffer->data());      // NOLINT
    zs.avail_out = static_cast<uInt>(buffer->size());
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    const size_t n = buffer->size() - zs.avail_out;
    total += static_cast<int64_t>(n);
    piece(buffer->data(), n);
  }
  inflateEnd(&zs);
  return rc == Z_STREAM_END && zs.avail_in == 0 ? total : -1;
}

// The same with ISA-L's inflate, its CRC-32 and size checks included; the
// bytes of output, or -1.
int64_t InflateIsal(const std::string& gz, std::vector<char>* buffer) {
  if (gz.size() > UINT32_MAX || buffer->size() > UINT32_MAX) return -1;
  auto state = std::make_unique<inflate_state>();
  isal_inflate_init(state.get());
  state->crc_flag = ISAL_GZIP;
  state->next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(gz.data()));  // NOLINT
  state->avail_in = static_cast<uint32_t>(gz.size());
  int64_t total = 0;
  while (true) {
    state->next_out = reinterpret_cast<uint8_t*>(buffer->data());  // NOLINT
    state->avail_out = static_cast<uint32_t>(buffer->size());
    if (isal_inflate(state.get()) != ISAL_DECOMP_OK) return -1;
    total += static_cast<int64_t>(buffer->size() - state->avail_out);
    if (state->block_state == ISAL_BLOCK_FINISH) {
      if (state->avail_in == 0) return total;
      uint8_t* const next_in = state->next_in;  // the next member
      const uint32_t avail_in = state->avail_in;
      isal_inflate_init(state.get());
      state->crc_flag = ISAL_GZIP;
      state->next_in = next_in;
      state->avail_in = avail_in;
    } else if (state->avail_in == 0 && state->avail_out != 0) {
      return -1;  // the data ends inside a member
    }
  }
}

// Trace events in the converter's output: one "ph" key each.
int64_t CountEvents(const std::string& gz, std::vector<char>* buffer, int64_t* json_bytes) {
  static constexpr std::string_view kKey = "\"ph\": ";
  std::string window;
  int64_t events = 0;
  *json_bytes = Inflate(gz, buffer, [&](const char* data, size_t n) {
    // The tail of the previous piece, so that a key split across pieces counts.
    window.erase(0, window.size() > kKey.size() ? window.size() - kKey.size() + 1 : 0);
    window.append(data, n);
    for (size_t at = window.find(kKey); at != std::string::npos; at = window.find(kKey, at + 1)) {
      ++events;
    }
  });
  return events;
}

int RunInflate(const Options& o) {
  std::string gz;
  if (!ReadFile(o.inflate, &gz)) {
    std::fprintf(stderr, "gpuctl_make_traces: cannot read %s\n", o.inflate.c_str());
    return 1;
  }
  std::vector<char> buffer(kChunk);
  std::vector<std::string> seconds, wall, isal;
  for (int r = 0; r < o.runs; ++r) {
    const double i0 = ThreadCpuSeconds();
    if (InflateIsal(gz, &buffer) < 0) {
      std::fprintf(stderr, "gpuctl_make_traces: ISA-L cannot inflate %s\n", o.inflate.c_str());
      return 1;
    }
    isal.push_back(absl::StrFormat("%.4f", ThreadCpuSeconds() - i0));
    const auto w0 = std::chrono::steady_clock::now();
    const double t0 = ThreadCpuSeconds();
    if (Inflate(gz, &buffer, [](const char*, size_t) {}) < 0) {
      std::fprintf(stderr, "gpuctl_make_traces: %s is not valid gzip\n", o.inflate.c_str());
      return 1;
    }
    seconds.push_back(absl::StrFormat("%.4f", ThreadCpuSeconds() - t0));
    wall.push_back(absl::StrFormat(
        "%.4f", std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count()));
  }
  int64_t json_bytes = 0;
  const int64_t events = CountEvents(gz, &buffer, &json_bytes);
  std::printf(
      "{\"file\": \"%s\", \"json_bytes\": %lld, \"events\": %lld, \"seconds\": [%s], "
      "\"wall_seconds\": [%s], \"isal_seconds\": [%s]}\n",
      o.inflate.c_str(), static_cast<long long>(json_bytes), static_cast<long long>(events),
      absl::StrJoin(seconds, ", ").c_str(), absl::StrJoin(wall, ", ").c_str(),
      absl::StrJoin(isal, ", ").c_str());
  return 0;
}

// One rank through ProcessCapture into the store; its manifest entry.
bool StoreRank(int rank, int ranks, Workload workload, daemon::LocalTraceStore* store,
               v1::ProcessResult* out) {
  daemon::CaptureJob job;
  job.trace_id = kTraceId;
  job.host = kHost;
  job.process.set_pid(workload.pid);
  job.own_pid = workload.pid;
  job.process.set_rank(rank);
  job.process.set_world_size(ranks);
  job.process.set_job_id(kJob);
  job.process.add_cmdline("python3");
  job.process.add_cmdline("train.py");
  job.file_name = daemon::TraceFileName(kHost, rank, workload.pid);
  job.payload = std::make_unique<OwnedPayload>(std::move(workload.payload));
  job.window_start_ns = kWindowStartNs;
  job.window_end_ns = workload.window_end_ns;
  v1::ProcessResult result = daemon::ProcessCapture(std::move(job), store);
  if (result.status() != v1::CAPTURE_STATUS_OK) {
    std::fprintf(stderr, "gpuctl_make_traces: rank %d: %s: %s\n", rank,
                 v1::CaptureStatus_Name(result.status()).c_str(), result.message().c_str());
    return false;
  }
  // The identity the daemon adds to each result.
  result.set_pid(workload.pid);
  result.set_rank(rank);
  result.set_host(kHost);
  result.set_job_id(kJob);
  *out = std::move(result);

  std::string gz;
  const std::string path = absl::StrCat(store->Location(kTraceId), "/", out->file());
  std::vector<char> buffer(kChunk);
  int64_t json_bytes = 0;
  const int64_t events = ReadFile(path, &gz) ? CountEvents(gz, &buffer, &json_bytes) : -1;
  std::printf("{\"file\": \"%s\", \"events\": %lld, \"json_bytes\": %lld, \"gzip_bytes\": %zu}\n",
              path.c_str(), static_cast<long long>(events), static_cast<long long>(json_bytes),
              gz.size());
  std::fflush(stdout);
  return events > 0;
}

int RunMake(const Options& o) {
  daemon::LocalStoreOptions store_options;
  store_options.host = kHost;
  auto store = daemon::LocalTraceStore::Create(o.out, store_options);
  if (!store.ok()) {
    std::fprintf(stderr, "gpuctl_make_traces: %s\n", store.status().ToString().c_str());
    return 1;
  }
  // Files of an earlier run with more ranks would stay beside the new ones.
  const std::string location = (*store)->Location(kTraceId);
  if (std::error_code ec; std::filesystem::exists(location, ec) || ec) {
    std::fprintf(stderr, "gpuctl_make_traces: %s exists: remove it or choose another --out\n",
                 location.c_str());
    return 1;
  }
  WorkloadOptions w;
  w.world_size = o.ranks;
  w.events = o.events;
  w.seed = o.seed;
  w.straggler = o.straggler == -2 ? o.ranks - 1 : o.straggler;
  w.window_start_ns = kWindowStartNs;
  std::vector<Workload> workloads = BuildWorkloads(w);
  v1::TraceManifest manifest;
  for (int rank = 0; rank < o.ranks; ++rank) {
    Workload workload = std::move(workloads[static_cast<size_t>(rank)]);
    if (!StoreRank(rank, o.ranks, std::move(workload), store->get(), manifest.add_results())) {
      return 1;
    }
  }
  const absl::Time start = absl::FromUnixNanos(kWindowStartNs);
  manifest.set_trace_id(kTraceId);
  manifest.set_host(kHost);
  manifest.set_daemon_version("bench");
  manifest.set_job_id(kJob);
  manifest.mutable_created_at()->set_seconds(absl::ToUnixSeconds(start) - 1);
  manifest.mutable_start_time()->set_seconds(absl::ToUnixSeconds(start));
  manifest.mutable_completed_at()->set_seconds(absl::ToUnixSeconds(start) + 60);
  manifest.mutable_duration()->set_seconds(30);
  manifest.set_location((*store)->Location(kTraceId));
  manifest.mutable_storage()->set_state(v1::STORAGE_STATE_LOCAL);
  manifest.mutable_storage()->set_local_location((*store)->Location(kTraceId));
  manifest.set_status(v1::TRACE_STATUS_COMPLETED);
  manifest.mutable_trigger()->set_kind(v1::TRIGGER_KIND_ON_DEMAND);
  manifest.set_selector(absl::StrCat("job \"", kJob, "\""));
  if (absl::Status st = (*store)->PutManifest(manifest); !st.ok()) {
    std::fprintf(stderr, "gpuctl_make_traces: manifest: %s\n", st.ToString().c_str());
    return 1;
  }
  std::printf("%s\n", (*store)->Location(kTraceId).c_str());
  return 0;
}

bool ParseInt(const char* s, int64_t min, int64_t max, int64_t* out) {
  char* end = nullptr;
  errno = 0;
  const int64_t v = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v < min || v > max) return false;
  *out = v;
  return true;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) return false;
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    int64_t v = 0;
    if (flag == "--out") {
      o->out = value;
    } else if (flag == "--inflate") {
      o->inflate = value;
    } else if (flag == "--ranks" && ParseInt(value, 1, 1024, &v)) {
      o->ranks = static_cast<int>(v);
    } else if (flag == "--events" && ParseInt(value, 1, int64_t{1} << 32, &v)) {
      o->events = v;
    } else if (flag == "--seed" && ParseInt(value, 0, INT64_MAX, &v)) {
      o->seed = static_cast<uint64_t>(v);
    } else if (flag == "--straggler" && ParseInt(value, -1, 1023, &v)) {
      o->straggler = static_cast<int>(v);
    } else if (flag == "--runs" && ParseInt(value, 1, 1000, &v)) {
      o->runs = static_cast<int>(v);
    } else {
      return false;
    }
  }
  if (o->out.empty() == o->inflate.empty()) return false;
  return o->straggler < o->ranks;
}

}  // namespace
}  // namespace gpuctl::bench

int main(int argc, char** argv) {
  gpuctl::bench::Options o;
  if (!gpuctl::bench::ParseArgs(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: gpuctl_make_traces --out DIR [--ranks R] [--events E] [--seed S] "
                 "[--straggler RANK|-1]\n"
                 "       gpuctl_make_traces --inflate FILE [--runs N]\n");
    return 2;
  }
  return o.inflate.empty() ? gpuctl::bench::RunMake(o) : gpuctl::bench::RunInflate(o);
}
