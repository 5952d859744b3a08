#ifndef GPUCTL_DAEMON_S3_HTTP_TRANSPORT_H_
#define GPUCTL_DAEMON_S3_HTTP_TRANSPORT_H_

#include <curl/curl.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/s3/credentials.h"
#include "daemon/s3/object_body.h"

namespace gpuctl::s3 {

struct HttpResponse;

// One HTTP exchange, signed by libcurl (CURLOPT_AWS_SIGV4).
struct HttpRequest {
  std::string method;  // GET, HEAD, PUT, POST or DELETE
  // Path and query already in SigV4 canonical form (s3_uri.h): libcurl
  // signs them exactly as written.
  std::string url;
  // "Name: value" lines; libcurl signs every one of them.
  std::vector<std::string> headers;
  // Sent as x-amz-content-sha256, which libcurl also takes as the payload
  // hash it signs: the lowercase hex SHA-256 of the body.
  std::string payload_sha256 = std::string(kEmptySha256);
  // The body of a PUT or POST: `body_length` bytes of `body` from
  // `body_offset`. `body` must outlive the call.
  const ObjectBody* body = nullptr;
  uint64_t body_offset = 0;
  uint64_t body_length = 0;
  // Total limit for the attempt; zero leaves only the idle timeout.
  absl::Duration timeout = absl::ZeroDuration();
  // Takes a 2xx response's body chunk by chunk (instead of
  // HttpResponse::body), with the response as far as it has come (status
  // and headers); returning false aborts the transfer.
  std::function<bool(const HttpResponse& response, absl::string_view chunk)> on_body;
  // Body bytes kept in HttpResponse::body; the rest is dropped.
  size_t max_body = size_t{64} << 10;
};

struct HttpResponse {
  CURLcode curl_code = CURLE_OK;
  std::string curl_error;  // curl's explanation when curl_code != CURLE_OK
  // Of the last response that began, even when the transfer then failed
  // (a server may refuse an upload and close before reading it); 0: none.
  int status = 0;
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;
  bool body_truncated = false;
  // on_body returned false.
  bool aborted_by_receiver = false;
  // Reading the request body failed (the file shrank, an I/O error).
  absl::Status body_error;
  // Bytes handed to on_body.
  uint64_t body_bytes_received = 0;

  // The header's value, or "" when absent.
  std::string Header(const std::string& lowercase_name) const;
};

struct TransportOptions {
  std::string region;
  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration idle_timeout = absl::Seconds(30);
  std::string ca_file;
  // Fixed name resolutions, "host:port:address" as curl's --resolve.
  std::vector<std::string> resolve;
};

// Performs requests with libcurl, one easy handle per call. Thread-safe;
// finished handles are kept (with their open connections) for reuse.
class HttpTransport {
 public:
  explicit HttpTransport(TransportOptions options);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  HttpResponse Perform(const HttpRequest& request, const S3Credentials& credentials);

 private:
  CURL* Acquire();
  void Release(CURL* handle);

  const TransportOptions options_;
  const std::string sigv4_;  // "aws:amz:<region>:s3"
  curl_slist* resolve_ = nullptr;
  absl::Mutex mu_;
  std::vector<CURL*> idle_ ABSL_GUARDED_BY(mu_);
};

// curl_global_init and libxml2's xmlInitParser, once per process. Called
// by S3Client::Create; thread-safe.
void InitS3LibrariesOnce();

}  // namespace gpuctl::s3

#endif  // GPUCTL_DAEMON_S3_HTTP_TRANSPORT_H_
