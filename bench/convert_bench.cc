// gpuctl_convert_bench: what a capture costs on each side.
//
// Client: the library's RecordWriter appending a realistic mix of records
// (what the agent thread does per CUPTI record after translation).
// Daemon: the payload through the reader, the Chrome trace converter and
// gzip, as ProcessCapture runs it (streamed, one thread), against gzip of
// the same JSON bytes alone in the same run: the floor the conversion
// cannot beat while the output is gzip-compressed JSON.
//
// Baseline, in the same run: zlib's streaming deflate at level 6 on the
// same JSON (what the daemon compressed with before libdeflate), its time
// and its size.
//
// Ingest summary, in the same run: the streamed conversion again with the
// manifest summary computed as it writes (IngestSummary, as ProcessCapture
// runs it), alternating with the conversion without it, and the cost as
// the ratio of the two p50s.
//
// Usage: gpuctl_convert_bench [--launches N] [--runs R] [--level L]
// Prints a markdown table (p50/p90/p99 over R runs, one core).
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client_lib/src/record_writer.h"
#include "daemon/convert/chrome_trace.h"
#include "daemon/convert/gzip.h"
#include "daemon/convert/record_reader.h"
#include "daemon/core/ingest_summary.h"
#include "gpuctl/v1/records.h"

namespace gpuctl {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int launches = 60000;  // ~200k records: see BuildPayload
  int runs = 11;
  int level = daemon::kDefaultGzipLevel;
};

constexpr int kBaselineZlibLevel = 6;
constexpr int32_t kPid = 4242;
constexpr int64_t kWindowStart = 1704067200'000'000'000;
constexpr int64_t kLaunchSpacingNs = 5000;

// Mangled names of the length real PyTorch kernels have.
std::vector<std::string> KernelNames() {
  constexpr int kNames = 48;
  std::vector<std::string> names;
  names.reserve(kNames);
  for (int i = 0; i < kNames; ++i) {
    names.push_back(absl::StrCat(
        "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, "
        "float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >(int, ",
        i, ")"));
  }
  return names;
}

// One launch = runtime call + external correlation + GPU op (85 % kernels,
// 10 % copies, 5 % memsets); a range every 16 launches, a step every 1000.
// 60000 launches give ~190k records.
std::string BuildPayload(const Options& o, const std::vector<std::string>& names,
                         uint64_t* records) {
  client::RecordWriter w;
  client::DeviceInfoRecord device;
  device.name = w.InternString("NVIDIA H100 80GB HBM3");
  device.sm_count = 132;
  device.max_threads_per_sm = 2048;
  device.max_threads_per_block = 1024;
  device.max_registers_per_sm = 65536;
  device.max_registers_per_block = 65536;
  device.max_shared_memory_per_sm = 233472;
  device.max_shared_memory_per_block = 49152;
  device.max_blocks_per_sm = 32;
  device.warp_size = 32;
  device.compute_major = 9;
  w.Add(device);
  const uint32_t launch_name = w.InternString("cudaLaunchKernel");
  const uint32_t copy_name = w.InternString("cudaMemcpyAsync");
  const uint32_t range_name = w.InternString("aten::linear");
  for (int i = 0; i < o.launches; ++i) {
    const int64_t t = kWindowStart + int64_t{i} * kLaunchSpacingNs;
    const uint32_t correlation = static_cast<uint32_t>(i + 1);
    const int op = i % 20;
    if (i % 16 == 0) w.AddRange(kPid, t, t + 16 * kLaunchSpacingNs, range_name, 0, i / 16 + 1);
    if (i % 1000 == 0) w.AddStep(kPid, t, static_cast<uint64_t>(i / 1000));
    client::ApiCallRecord api;
    api.domain = records::kApiDomainRuntime;
    api.cbid = op < 17 ? 211 : 41;
    api.correlation_id = correlation;
    api.pid = kPid;
    api.tid = kPid;
    api.start_ns = t;
    api.end_ns = t + 3000;
    api.name = op < 17 ? launch_name : copy_name;
    w.Add(api);
    w.Add(client::ExternalCorrelationRecord{records::kExternalKindGpuctlRange, correlation,
                                            static_cast<uint64_t>(i / 16 + 1)});
    if (op < 17) {
      client::KernelRecord k;
      k.stream_id = 7 + op % 3;
      k.context_id = 1;
      k.correlation_id = correlation;
      k.name = w.InternString(names[i % names.size()]);
      k.start_ns = t + 4000;
      k.end_ns = t + 4000 + 2000 + int64_t{i % 7} * 100;
      k.grid[0] = 264 + i % 100;
      k.grid[1] = k.grid[2] = 1;
      k.block[0] = 256;
      k.block[1] = k.block[2] = 1;
      k.registers_per_thread = 32;
      w.Add(k);
    } else if (op < 19) {
      client::MemcpyRecord m;
      m.stream_id = 10;
      m.context_id = 1;
      m.correlation_id = correlation;
      m.copy_kind = 1;
      m.src_kind = 2;
      m.dst_kind = 3;
      m.start_ns = t + 4000;
      m.end_ns = t + 5000;
      m.bytes = 1 << 20;
      w.Add(m);
    } else {
      client::MemsetRecord m;
      m.stream_id = 7;
      m.context_id = 1;
      m.correlation_id = correlation;
      m.memory_kind = 3;
      m.start_ns = t + 4000;
      m.end_ns = t + 4200;
      m.bytes = 4096;
      w.Add(m);
    }
  }
  *records = w.event_count();
  client::PayloadHeaderInfo header;
  header.pid = kPid;
  header.window_start_ns = kWindowStart;
  header.window_end_ns = kWindowStart + int64_t{o.launches + 100} * kLaunchSpacingNs;
  return w.Finish(header);
}

class GzipSink final : public daemon::ByteSink {
 public:
  explicit GzipSink(daemon::GzipEncoder* encoder) : encoder_(encoder) {}
  absl::Status Append(absl::string_view data) override { return encoder_->Append(data); }

 private:
  daemon::GzipEncoder* encoder_;
};

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void Check(const absl::Status& st, const char* what) {
  if (!st.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, st.ToString().c_str());
    std::exit(1);
  }
}

struct Samples {
  std::vector<double> s;
  double Percentile(double p) {
    std::sort(s.begin(), s.end());
    size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(s.size()))) - 1;
    return s[std::min(i, s.size() - 1)];
  }
};

daemon::ChromeTraceMeta Meta() {
  daemon::ChromeTraceMeta meta;
  meta.trace_id = "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b";
  meta.host = "bench";
  meta.file_name = "bench-rank0-pid4242.json.gz";
  meta.process.set_pid(kPid);
  meta.process.set_rank(0);
  meta.process.set_world_size(1);
  return meta;
}

// zlib's deflate of `data` into a gzip stream at `level`, 64 KiB output
// pieces as the daemon's old encoder wrote them; returns the size.
size_t ZlibGzipSize(const std::string& data, int level) {
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::string out;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));  // NOLINT
  zs.avail_in = static_cast<uInt>(data.size());
  int rc;
  do {
    size_t old = out.size();
    out.resize(old + 65536);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + old);  // NOLINT
    zs.avail_out = 65536;
    rc = deflate(&zs, Z_FINISH);
    out.resize(old + 65536 - zs.avail_out);
  } while (rc == Z_OK || rc == Z_BUF_ERROR);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) std::abort();
  return out.size();
}

void Row(const char* stage, Samples& t, uint64_t records, uint64_t bytes) {
  double p50 = t.Percentile(0.5), p90 = t.Percentile(0.9), p99 = t.Percentile(0.99);
  std::string rate =
      bytes == 0 ? "-" : absl::StrFormat("%.0f", static_cast<double>(bytes) / p50 / 1e6);
  std::printf("| %s | %.1f | %.1f | %.1f | %.2f M | %s |\n", stage, p50 * 1e3, p90 * 1e3, p99 * 1e3,
              static_cast<double>(records) / p50 / 1e6, rate.c_str());
}

int Run(const Options& o) {
  const std::vector<std::string> names = KernelNames();
  uint64_t records = 0;
  Samples client;
  std::string payload;
  for (int r = 0; r < o.runs; ++r) {
    auto t0 = Clock::now();
    payload = BuildPayload(o, names, &records);
    client.s.push_back(Seconds(t0, Clock::now()));
  }
  daemon::RecordReaderOptions reader_options;
  reader_options.expected_pid = kPid;
  const absl::Span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(payload.data()),  // NOLINT
                                        payload.size());
  Samples read, convert, gzip_only, zlib_only, full, with_summary;
  // The streamed conversion as ProcessCapture runs it; with the ingest
  // summary when `summary` is not null.
  auto streamed = [&](daemon::IngestSummary* summary) {
    auto decoded = daemon::ReadRecords(bytes, reader_options);
    Check(decoded.status(), "read");
    if (summary != nullptr) {
      summary->Reserve(decoded->kernels.size() + decoded->memcpys.size() + decoded->memsets.size());
    }
    auto encoder = daemon::GzipEncoder::Create(o.level);
    Check(encoder.status(), "gzip");
    GzipSink sink(encoder->get());
    Check(daemon::WriteChromeTrace(*decoded, Meta(), &sink, summary), "convert");
    Check((*encoder)->Finish(), "gzip");
    if (summary != nullptr && summary->Finish().gpu_span_ns() <= 0) std::abort();
    return (*encoder)->output().size();
  };
  uint64_t json_bytes = 0, gz_bytes = 0, zlib_bytes = 0;
  for (int r = 0; r < o.runs; ++r) {
    auto t0 = Clock::now();
    auto decoded = daemon::ReadRecords(bytes, reader_options);
    auto t1 = Clock::now();
    Check(decoded.status(), "read");
    daemon::StringSink json;
    Check(daemon::WriteChromeTrace(*decoded, Meta(), &json), "convert");
    auto t2 = Clock::now();
    auto gz = daemon::GzipCompress(json.str(), o.level);
    auto t3 = Clock::now();
    Check(gz.status(), "gzip");
    read.s.push_back(Seconds(t0, t1));
    convert.s.push_back(Seconds(t1, t2));
    gzip_only.s.push_back(Seconds(t2, t3));
    json_bytes = json.str().size();
    auto t5 = Clock::now();
    zlib_bytes = ZlibGzipSize(json.str(), kBaselineZlibLevel);
    zlib_only.s.push_back(Seconds(t5, Clock::now()));

    // Alternating which goes first, so that neither always runs warm.
    for (int pass = 0; pass < 2; ++pass) {
      const bool summarize = (pass == 0) == (r % 2 == 1);
      daemon::IngestSummary summary;
      auto t4 = Clock::now();
      gz_bytes = streamed(summarize ? &summary : nullptr);
      (summarize ? with_summary : full).s.push_back(Seconds(t4, Clock::now()));
    }
  }
  std::printf(
      "%llu records (%d launches), payload %.1f MB, JSON %.1f MB, gzip level %d %.3f MB "
      "(zlib at level 6: %.3f MB, %+.2f %%); %d runs, one thread\n\n",
      static_cast<unsigned long long>(records), o.launches,
      static_cast<double>(payload.size()) / 1e6, static_cast<double>(json_bytes) / 1e6, o.level,
      static_cast<double>(gz_bytes) / 1e6, static_cast<double>(zlib_bytes) / 1e6,
      (static_cast<double>(gz_bytes) / static_cast<double>(zlib_bytes) - 1) * 100, o.runs);
  std::printf(
      "| stage | p50 ms | p90 ms | p99 ms | records/s per core (p50) | MB/s of JSON (p50) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  Row("client: RecordWriter appends (whole payload)", client, records, 0);
  Row("daemon: read + validate", read, records, json_bytes);
  Row("daemon: records -> JSON", convert, records, json_bytes);
  Row("limit: gzip of that JSON alone", gzip_only, records, json_bytes);
  Row("baseline: zlib level 6 deflate of that JSON alone", zlib_only, records, json_bytes);
  Row("daemon: read + JSON + gzip, streamed, without the summary", full, records, json_bytes);
  Row("daemon: the same with the ingest summary (ProcessCapture)", with_summary, records,
      json_bytes);
  std::printf(
      "\nclient cost per record (p50): %.0f ns; daemon end-to-end per record (p50): "
      "%.0f ns, %.2fx the gzip-only time; gzip alone %.2fx faster than zlib level 6\n",
      client.Percentile(0.5) / static_cast<double>(records) * 1e9,
      full.Percentile(0.5) / static_cast<double>(records) * 1e9,
      full.Percentile(0.5) / gzip_only.Percentile(0.5),
      zlib_only.Percentile(0.5) / gzip_only.Percentile(0.5));
  std::printf(
      "ingest summary: %+.1f %% of the streamed conversion's time (p50 %.1f ms vs %.1f ms)\n",
      (with_summary.Percentile(0.5) / full.Percentile(0.5) - 1) * 100,
      with_summary.Percentile(0.5) * 1e3, full.Percentile(0.5) * 1e3);
  return 0;
}

bool ParseInt(const char* s, int min, int* out) {
  char* end = nullptr;
  const int64_t v = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0' || v < min || v > 100000000) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace
}  // namespace gpuctl

int main(int argc, char** argv) {
  gpuctl::Options o;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    bool ok = has_value;
    if (ok && std::strcmp(argv[i], "--launches") == 0) {
      ok = gpuctl::ParseInt(argv[++i], 1, &o.launches);
    } else if (ok && std::strcmp(argv[i], "--runs") == 0) {
      ok = gpuctl::ParseInt(argv[++i], 1, &o.runs);
    } else if (ok && std::strcmp(argv[i], "--level") == 0) {
      ok = gpuctl::ParseInt(argv[++i], 0, &o.level) && o.level <= 9;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "usage: gpuctl_convert_bench [--launches N] [--runs R] [--level 0-9]\n");
      return 2;
    }
  }
  return gpuctl::Run(o);
}
