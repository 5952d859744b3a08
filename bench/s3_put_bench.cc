// gpuctl_s3_put_bench: stores files with gpuctld's S3 client and trace
// stores, one request per stdin line, so bench/s3_store_bench.py can
// interleave them with copies and another client's uploads in the same run.
//
//   stdin (one per line):
//     put KEY PATH   S3Client::PutObjectFromFile
//     store PATH     a new one-file trace into an S3TraceStore: PutFile +
//                    PutManifest, which returns once the trace is uploaded
//                    (upload_wait), its local data file then removed
//     local PATH     the same into a LocalTraceStore (the store without S3)
//   stdout: ok SECONDS   the wall time
//           error MESSAGE
//
// The stores' directories go under --dir (default: a new directory under
// $TMPDIR or /var/tmp), removed at exit.
// The bucket comes from S3_ENDPOINT, S3_REGION and S3_BUCKET (as
// scripts/ceph/start.sh writes them to DIR/env), the credentials from
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. The client uses gpuctld's
// defaults (multipart above 16 MiB in 8 MiB parts) unless
// --multipart-threshold / --part-size (bytes) say otherwise.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/common/trace_id.h"
#include "daemon/s3/s3_client.h"
#include "daemon/s3/s3_config.h"
#include "daemon/s3/s3_trace_store.h"
#include "daemon/store/local_store.h"
#include "gpuctl/v1/manifest.pb.h"

namespace gpuctl {
namespace {

std::string EnvOr(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream data;
  data << in.rdbuf();
  return data.str();
}

// Stores one trace of one file, as a capture of one process does; the
// file's bytes are already in memory (the daemon writes what it converted).
absl::Status StoreTrace(daemon::TraceStore& store, const std::string& data, absl::BitGen& gen) {
  const std::string trace_id = GenerateTraceId(absl::Now(), gen);
  const std::string file = "bench-rank0-pid1.json.gz";
  if (absl::Status st = store.PutFile(trace_id, file, data); !st.ok()) return st;
  v1::TraceManifest manifest;
  manifest.set_trace_id(trace_id);
  manifest.set_job_id("bench");
  v1::ProcessResult* result = manifest.add_results();
  result->set_pid(1);
  result->set_status(v1::CAPTURE_STATUS_OK);
  result->set_file(file);
  result->set_stored_bytes(data.size());
  return store.PutManifest(manifest);
}

bool ParseBytes(const char* text, uint64_t* out) {
  char* end = nullptr;
  const uint64_t v = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || v == 0) return false;
  *out = v;
  return true;
}

int Run(int argc, char** argv) {
  std::string dir;
  s3::S3Config config;
  config.endpoint = EnvOr("S3_ENDPOINT", "");
  config.region = EnvOr("S3_REGION", "us-east-1");
  config.bucket = EnvOr("S3_BUCKET", "");
  config.path_style = true;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    uint64_t* bytes = !has_value ? nullptr
                      : std::strcmp(argv[i], "--multipart-threshold") == 0
                          ? &config.multipart_threshold
                      : std::strcmp(argv[i], "--part-size") == 0 ? &config.part_size
                                                                 : nullptr;
    if (bytes != nullptr && ParseBytes(argv[i + 1], bytes)) {
      ++i;
    } else if (has_value && std::strcmp(argv[i], "--dir") == 0) {
      dir = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: gpuctl_s3_put_bench [--multipart-threshold BYTES] [--part-size BYTES] "
                   "[--dir DIR]\n"
                   "(S3_ENDPOINT, S3_REGION, S3_BUCKET, AWS_* from the environment)\n");
      return 2;
    }
  }
  if (config.endpoint.empty() || config.bucket.empty()) {
    std::fprintf(stderr, "gpuctl_s3_put_bench: set S3_ENDPOINT and S3_BUCKET\n");
    return 2;
  }
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/var/tmp",
                                    "/gpuctl-s3-put-bench-XXXXXX");
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror("gpuctl_s3_put_bench: mkdtemp");
      return 1;
    }
    dir = tmpl;
  }
  struct RemoveDir {
    std::string path;
    ~RemoveDir() { std::filesystem::remove_all(path); }
  } remove_dir{dir};

  auto client = s3::S3Client::Create(config);
  s3::S3Config store_config = config;
  store_config.prefix = "bench-store";
  auto store_client = s3::S3Client::Create(store_config);
  auto spool = daemon::LocalTraceStore::Create(dir + "/spool");
  auto local = daemon::LocalTraceStore::Create(dir + "/local");
  for (const absl::Status& st :
       {client.status(), store_client.status(), spool.status(), local.status()}) {
    if (!st.ok()) {
      std::fprintf(stderr, "gpuctl_s3_put_bench: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  std::unique_ptr<s3::S3TraceStore> store =
      s3::S3TraceStore::Create(*std::move(spool), *std::move(store_client), s3::S3StoreOptions{});
  absl::BitGen gen;

  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream words(line);
    std::string verb, first, second;
    words >> verb >> first >> second;
    absl::Status status;
    std::chrono::duration<double> took{};
    if (verb == "put" && !second.empty()) {
      auto start = std::chrono::steady_clock::now();
      status = (*client)->PutObjectFromFile(first, second);
      took = std::chrono::steady_clock::now() - start;
    } else if ((verb == "store" || verb == "local") && !first.empty()) {
      absl::StatusOr<std::string> data = ReadFile(first);
      status = data.status();
      if (data.ok()) {
        daemon::TraceStore& target =
            verb == "store" ? static_cast<daemon::TraceStore&>(*store) : **local;
        auto start = std::chrono::steady_clock::now();
        status = StoreTrace(target, *data, gen);
        took = std::chrono::steady_clock::now() - start;
      }
      // The S3 store must have uploaded it by then, not left it pending.
      if (status.ok() && verb == "store" && store->pending_uploads() != 0) {
        status = absl::UnavailableError("the trace was not uploaded within upload_wait");
      }
    } else {
      std::printf("error expected \"put KEY PATH\", \"store PATH\" or \"local PATH\", got \"%s\"\n",
                  line.c_str());
      std::fflush(stdout);
      continue;
    }
    if (status.ok()) {
      std::printf("ok %.6f\n", took.count());
    } else {
      std::string message(status.message());
      for (char& c : message) {
        if (c == '\n') c = ' ';
      }
      std::printf("error %s\n", message.c_str());
    }
    std::fflush(stdout);
  }
  store->Shutdown();
  return 0;
}

}  // namespace
}  // namespace gpuctl

int main(int argc, char** argv) { return gpuctl::Run(argc, argv); }
