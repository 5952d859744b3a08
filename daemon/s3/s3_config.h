#ifndef GPUCTL_DAEMON_S3_S3_CONFIG_H_
#define GPUCTL_DAEMON_S3_S3_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gpuctl::s3 {

inline constexpr uint64_t kMiB = uint64_t{1} << 20;
// S3's multipart limits: every part but the last is at least 5 MiB, at
// most 5 GiB, and an upload has at most 10000 parts.
inline constexpr uint64_t kMinPartSize = 5 * kMiB;
inline constexpr uint64_t kMaxPartSize = uint64_t{5} << 30;
inline constexpr uint64_t kMaxParts = 10000;
// The longest object key S3 accepts, in bytes.
inline constexpr size_t kMaxKeyLength = 1024;

// Where and how to reach one bucket of an S3-compatible object store.
struct S3Config {
  // "http://host[:port]" or "https://host[:port]"; a trailing "/" is allowed,
  // any other path, a query or user info is not.
  std::string endpoint;
  // The SigV4 signing region ("us-east-1"; radosgw accepts its zonegroup name).
  std::string region;
  std::string bucket;
  // Prepended to trace object keys (see trace_object_key.h). May be empty;
  // never starts or ends with '/'.
  std::string prefix;
  // true: http://host/bucket/key. false: http://bucket.host/key, which needs
  // a DNS name as the endpoint's host, not an IP address.
  bool path_style = false;

  // Credentials, first match wins:
  //  1. access_key_id + secret_access_key (+ session_token) below;
  //  2. credentials_file, an AWS shared credentials file, section `profile`;
  //  3. AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN).
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  std::string credentials_file;
  std::string profile = "default";

  // PEM bundle of the CAs trusted for https; empty: the system's.
  std::string ca_file;

  absl::Duration connect_timeout = absl::Seconds(10);
  // Bounds one attempt of a request that carries no object data (HEAD, LIST,
  // DELETE, multipart control).
  absl::Duration request_timeout = absl::Seconds(60);
  // An attempt that moves object data is abandoned once it has moved no byte
  // for this long (a total limit would fail large objects on slow links).
  absl::Duration idle_timeout = absl::Seconds(30);

  // Attempts per request, the first included; retried are connection
  // errors, 5xx, 429 and SlowDown, with exponential backoff and full jitter:
  // before attempt n+1 a uniform wait in [0, min(max_backoff,
  // initial_backoff * 2^(n-1))].
  int max_attempts = 5;
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(10);

  // Objects larger than this go up in parts of part_size bytes (raised when
  // needed to stay within 10000 parts).
  uint64_t multipart_threshold = 16 * kMiB;
  uint64_t part_size = 8 * kMiB;
};

// The parsed S3Config::endpoint.
struct S3Endpoint {
  std::string scheme;  // "http" or "https"
  // As written, IPv6 literals with their brackets.
  std::string host;
  // Empty for the scheme's default port.
  std::string port;
  bool host_is_ip = false;

  // "scheme://host[:port]", with `host_prefix` ("bucket.") before the host.
  std::string Origin(absl::string_view host_prefix = "") const;
};

absl::StatusOr<S3Endpoint> ParseS3Endpoint(absl::string_view endpoint);

// INVALID_ARGUMENT naming the offending field. Credentials are checked when
// they are resolved (credentials.h), not here.
absl::Status ValidateS3Config(const S3Config& config);

// S3 bucket naming rules: 3-63 of [a-z0-9.-], starting and ending with a
// letter or digit, no "..", not shaped like an IPv4 address.
bool IsValidBucketName(absl::string_view bucket);

// Keys this client writes or reads: 1-1024 bytes, no control characters.
absl::Status ValidateObjectKey(absl::string_view key);

// A key prefix: empty, or a valid key without a leading or trailing '/' and
// without empty segments ("a//b").
absl::Status ValidateKeyPrefix(absl::string_view prefix);

// The bound of the wait before retry number `attempt` (1 for the first
// retry): `initial` doubled per earlier retry, at most `max`. Callers add
// their jitter below it.
absl::Duration ExponentialBackoff(absl::Duration initial, absl::Duration max, int attempt);

}  // namespace gpuctl::s3

#endif  // GPUCTL_DAEMON_S3_S3_CONFIG_H_
