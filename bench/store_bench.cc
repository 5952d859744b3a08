// gpuctl_store_bench: the local trace store on local disk.
//
// Throughput: PutFile of gzip trace files of realistic sizes (each into a
// new trace, as a capture's first file) against the raw cost of the same
// bytes, write() + fsync() of a plain file, measured alternately in the
// same run. PutFile adds a temporary name, a rename, the new trace
// directory and two directory fsyncs.
//
// Index: a store of N traces (100 000 by default, each a realistic
// 8-rank manifest and one data file), written without fsync to save time,
// then the startup scan that builds the index (Create) and List latency:
// the first page, a middle page and job-filtered pages, against listing
// without an index (scan the root, sort, read manifests until the page is
// full) in the same run.
//
// Usage: gpuctl_store_bench [--dir DIR] [--traces N] [--runs R] [--lists L]
// DIR (default: a new directory under $TMPDIR or /var/tmp) must be on the
// disk to measure; everything written is removed at the end.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/common/log.h"
#include "daemon/common/trace_id.h"
#include "daemon/store/local_store.h"
#include "google/protobuf/util/json_util.h"

namespace gpuctl {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct Options {
  std::string dir;
  int traces = 100000;
  int runs = 15;
  int lists = 300;
};

constexpr int kJobs = 100;  // the filtered listing selects 1 % of the store
constexpr int kRanks = 8;

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

std::string RandomBytes(size_t n, absl::BitGen& gen) {
  std::string data(n, '\0');
  for (char& c : data) c = static_cast<char>(absl::Uniform<uint8_t>(gen));
  return data;  // incompressible, like gzip output
}

// write() + fsync() + close() of a new file: what any durable write costs.
void RawWrite(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) Check(absl::InternalError(std::strerror(errno)), "open");
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) Check(absl::InternalError(std::strerror(errno)), "write");
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    Check(absl::InternalError(std::strerror(errno)), "fsync");
  }
}

void Throughput(const Options& o, absl::BitGen& gen) {
  auto store = daemon::LocalTraceStore::Create(o.dir + "/throughput");
  Check(store.status(), "creating the store");
  std::printf(
      "| file | raw write+fsync MB/s (p50) | PutFile MB/s (p50) | PutFile / raw | "
      "raw ms p50 / p90 | PutFile ms p50 / p90 |\n|---|---:|---:|---:|---:|---:|\n");
  // 2.8 MB: 60 000 kernel launches (see gpuctl_convert_bench).
  for (size_t size : {size_t{256} << 10, size_t{2'800'000}, size_t{28'000'000}}) {
    std::string data = RandomBytes(size, gen);
    Samples raw, put;
    for (int r = 0; r < o.runs; ++r) {
      std::string raw_path = absl::StrCat(o.dir, "/raw-", r);
      auto t0 = Clock::now();
      RawWrite(raw_path, data);
      auto t1 = Clock::now();
      std::string id = GenerateTraceId(absl::Now(), gen);
      Check((*store)->PutFile(id, "host-rank0-pid1.json.gz", data), "PutFile");
      auto t2 = Clock::now();
      raw.s.push_back(Seconds(t0, t1));
      put.s.push_back(Seconds(t1, t2));
      ::unlink(raw_path.c_str());
      Check((*store)->Delete(id), "Delete");
    }
    double raw50 = raw.Percentile(0.5), put50 = put.Percentile(0.5);
    std::printf("| %s | %.0f | %.0f | %.2f | %.1f / %.1f | %.1f / %.1f |\n",
                absl::StrFormat("%.2f MB", static_cast<double>(size) / 1e6).c_str(),
                static_cast<double>(size) / raw50 / 1e6, static_cast<double>(size) / put50 / 1e6,
                raw50 / put50, raw50 * 1e3, raw.Percentile(0.9) * 1e3, put50 * 1e3,
                put.Percentile(0.9) * 1e3);
  }
}

v1::TraceManifest Manifest(const std::string& id, int job) {
  v1::TraceManifest m;
  m.set_trace_id(id);
  m.set_host("gpu-node-017");
  m.set_daemon_version("0.1.0");
  m.set_job_id(absl::StrCat("job-", job));
  m.set_selector(absl::StrCat("job \"job-", job, "\""));
  m.mutable_duration()->set_seconds(10);
  m.mutable_created_at()->set_seconds(1'700'000'000);
  m.mutable_start_time()->set_seconds(1'700'000'000);
  m.mutable_completed_at()->set_seconds(1'700'000'012);
  m.set_location("/var/lib/gpuctl/traces/" + id);
  for (int r = 0; r < kRanks; ++r) {
    m.add_requested_pids(4000 + r);
    v1::ProcessResult* p = m.add_results();
    p->set_pid(4000 + r);
    p->set_rank(r);
    p->set_host("gpu-node-017");
    p->set_job_id(m.job_id());
    p->set_status(v1::CAPTURE_STATUS_OK);
    p->set_event_count(183811);
    p->set_payload_bytes(10'900'000);
    p->set_stored_bytes(2'800'000);
    p->set_file(absl::StrCat("gpu-node-017-rank", r, "-pid", 4000 + r, ".json.gz"));
    p->mutable_window_start()->set_seconds(1'700'000'000);
    p->mutable_window_end()->set_seconds(1'700'000'010);
  }
  return m;
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  if (!out) Check(absl::InternalError(absl::StrCat("cannot write ", path)), "populating");
}

// N traces, oldest first, one per millisecond; trace i belongs to job i % kJobs.
std::vector<std::string> Populate(const std::string& root, int n, absl::BitGen& gen,
                                  size_t* manifest_bytes) {
  fs::create_directories(root);
  google::protobuf::util::JsonPrintOptions json_options;
  json_options.add_whitespace = true;
  json_options.preserve_proto_field_names = true;
  std::vector<std::string> ids;
  const absl::Time start = absl::Now() - absl::Hours(1);
  for (int i = 0; i < n; ++i) {
    std::string id = GenerateTraceId(start + absl::Milliseconds(i), gen);
    std::string dir = absl::StrCat(root, "/", id);
    if (::mkdir(dir.c_str(), 0750) != 0) Check(absl::InternalError(dir), "mkdir");
    std::string json;
    auto encoded =
        google::protobuf::util::MessageToJsonString(Manifest(id, i % kJobs), &json, json_options);
    if (!encoded.ok()) Check(absl::InternalError(encoded.ToString()), "encoding a manifest");
    *manifest_bytes = json.size();
    WriteFile(dir + "/gpu-node-017-rank0-pid4000.json.gz", "gz");
    WriteFile(dir + "/manifest.json", json);
    ids.push_back(std::move(id));
  }
  return ids;
}

size_t RssKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoul(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

bool DropCaches() {
  ::sync();
  std::ofstream drop("/proc/sys/vm/drop_caches");
  drop << "3\n";
  drop.flush();
  return static_cast<bool>(drop);
}

size_t ReaddirCount(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  size_t n = 0;
  while (::readdir(d) != nullptr) ++n;
  ::closedir(d);
  return n;
}

// Listing as it was done without an index: scan the root, sort the ids,
// read manifests newest first until the page is full.
void ScanList(daemon::LocalTraceStore& store, const std::string& root, const std::string& job) {
  std::vector<std::string> ids;
  DIR* d = ::opendir(root.c_str());
  while (struct dirent* e = ::readdir(d)) {
    if (IsValidTraceId(e->d_name)) ids.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(ids.begin(), ids.end(), std::greater<>());
  int found = 0;
  for (const std::string& id : ids) {
    auto manifest = store.GetManifest(id);
    Check(manifest.status(), "GetManifest");
    if (!job.empty() && manifest->job_id() != job) continue;
    if (++found == 100) return;
  }
}

void Latency(const char* what, int lists, const std::function<void()>& fn) {
  Samples t;
  for (int i = 0; i < lists; ++i) {
    auto t0 = Clock::now();
    fn();
    t.s.push_back(Seconds(t0, Clock::now()));
  }
  std::printf("| %s | %.3f | %.3f | %.3f |\n", what, t.Percentile(0.5) * 1e3,
              t.Percentile(0.9) * 1e3, t.Percentile(0.99) * 1e3);
}

void Index(const Options& o, absl::BitGen& gen) {
  const std::string root = o.dir + "/index";
  size_t manifest_bytes = 0;
  auto t0 = Clock::now();
  std::vector<std::string> ids = Populate(root, o.traces, gen, &manifest_bytes);
  std::printf("\nPopulated %d traces (%zu-byte manifests, %d jobs) in %.1f s.\n\n", o.traces,
              manifest_bytes, kJobs, Seconds(t0, Clock::now()));

  std::printf("| startup scan (Create) | seconds | index RSS |\n|---|---:|---:|\n");
  std::unique_ptr<daemon::LocalTraceStore> store;
  if (DropCaches()) {
    size_t before = RssKiB();
    auto t = Clock::now();
    auto created = daemon::LocalTraceStore::Create(root);
    Check(created.status(), "Create");
    std::printf("| cold page cache | %.2f | %.1f MiB |\n", Seconds(t, Clock::now()),
                static_cast<double>(RssKiB() - before) / 1024.0);
  } else {
    std::printf("| cold page cache | (cannot drop caches here) | |\n");
  }
  for (int r = 0; r < 3; ++r) {
    store.reset();
    size_t before = RssKiB();
    auto t = Clock::now();
    auto created = daemon::LocalTraceStore::Create(root);
    Check(created.status(), "Create");
    double s = Seconds(t, Clock::now());
    store = std::move(*created);
    std::printf("| warm page cache, run %d | %.2f | %.1f MiB |\n", r + 1, s,
                static_cast<double>(RssKiB() - before) / 1024.0);
  }
  if (store->Totals().complete != static_cast<uint64_t>(o.traces)) {
    Check(absl::InternalError("the index misses traces"), "Create");
  }

  std::printf("\n| %d traces, page of 100 | p50 ms | p90 ms | p99 ms |\n|---|---:|---:|---:|\n",
              o.traces);
  auto list = [&](const std::string& token, const std::string& job) {
    v1::ListTracesRequest req;
    req.set_page_size(100);
    req.set_page_token(token);
    req.set_job_id(job);
    auto page = store->List(req);
    Check(page.status(), "List");
    if (page->traces_size() == 0) Check(absl::InternalError("empty page"), "List");
  };
  Latency("List: first page", o.lists, [&] { list("", ""); });
  Latency("List: middle page", o.lists, [&] { list(ids[ids.size() / 2], ""); });
  Latency("List: first page of one job (1 % of the traces)", o.lists, [&] { list("", "job-7"); });
  Latency("List: middle page of one job", o.lists, [&] { list(ids[ids.size() / 2], "job-7"); });
  const int scans = std::min(o.lists, 10);
  Latency("without the index: readdir of the root alone", scans, [&] {
    if (ReaddirCount(root) < ids.size()) Check(absl::InternalError("readdir"), "readdir");
  });
  Latency("without the index: first page (scan, sort, read)", scans,
          [&] { ScanList(*store, root, ""); });
  Latency("without the index: first page of one job", scans,
          [&] { ScanList(*store, root, "job-7"); });
}

int Run(const Options& o) {
  SetMinLogLevel(LogLevel::kWarning);
  absl::BitGen gen;
  std::printf("Store directory: %s\n\n", o.dir.c_str());
  Throughput(o, gen);
  Index(o, gen);
  return 0;
}

}  // namespace
}  // namespace gpuctl

int main(int argc, char** argv) {
  gpuctl::Options o;
  bool ok = argc % 2 == 1;
  for (int i = 1; ok && i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--dir") == 0) {
      o.dir = argv[i + 1];
    } else if (std::strcmp(argv[i], "--traces") == 0) {
      o.traces = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--runs") == 0) {
      o.runs = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--lists") == 0) {
      o.lists = std::atoi(argv[i + 1]);
    } else {
      ok = false;
    }
  }
  if (!ok || o.traces < 200 || o.runs < 1 || o.lists < 1) {
    std::fprintf(stderr,
                 "usage: gpuctl_store_bench [--dir DIR] [--traces N>=200] [--runs R] "
                 "[--lists L]\n");
    return 2;
  }
  bool own_dir = o.dir.empty();
  if (own_dir) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl =
        absl::StrCat(tmp != nullptr ? tmp : "/var/tmp", "/gpuctl-store-bench-XXXXXX");
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    o.dir = tmpl;
  } else {
    o.dir = absl::StrCat(o.dir, "/gpuctl-store-bench-", ::getpid());
    std::filesystem::create_directories(o.dir);
  }
  int rc = gpuctl::Run(o);
  std::filesystem::remove_all(o.dir);
  return rc;
}
