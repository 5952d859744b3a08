#ifndef GPUCTL_DAEMON_S3_TESTING_S3_TEST_UTIL_H_
#define GPUCTL_DAEMON_S3_TESTING_S3_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/s3/s3_client.h"
#include "daemon/s3/testing/loopback_http_server.h"

namespace gpuctl::s3::testing {

inline constexpr char kTestAccessKey[] = "AKIDGPUCTLTEST";
inline constexpr char kTestSecretKey[] = "wJalr/XUtn+FEMI=K7MDENG";
inline constexpr char kTestRegion[] = "eu-test-1";
inline constexpr char kTestBucket[] = "traces";

// A path-style config for `server` with fixed keys and small timeouts.
inline S3Config LoopbackConfig(const LoopbackHttpServer& server) {
  S3Config config;
  config.endpoint = server.endpoint();
  config.region = kTestRegion;
  config.bucket = kTestBucket;
  config.path_style = true;
  config.access_key_id = kTestAccessKey;
  config.secret_access_key = kTestSecretKey;
  config.connect_timeout = absl::Seconds(5);
  config.request_timeout = absl::Seconds(20);
  config.idle_timeout = absl::Seconds(20);
  config.max_attempts = 3;
  config.initial_backoff = absl::Milliseconds(100);
  config.max_backoff = absl::Seconds(1);
  return config;
}

// Records the backoff waits instead of sleeping; the jitter is the full
// bound, so tests see the backoff caps themselves.
class RecordedWaits {
 public:
  S3ClientDeps Deps() {
    S3ClientDeps deps;
    deps.sleep = [this](absl::Duration d) {
      absl::MutexLock lock(&mu_);
      waits_.push_back(d);
    };
    deps.jitter = [](absl::Duration bound) { return bound; };
    deps.env = [](const std::string&) { return std::optional<std::string>(); };
    return deps;
  }
  std::vector<absl::Duration> waits() const {
    absl::MutexLock lock(&mu_);
    return waits_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<absl::Duration> waits_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuctl::s3::testing

#endif  // GPUCTL_DAEMON_S3_TESTING_S3_TEST_UTIL_H_
