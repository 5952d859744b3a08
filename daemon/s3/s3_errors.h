#ifndef GPUCTL_DAEMON_S3_S3_ERRORS_H_
#define GPUCTL_DAEMON_S3_S3_ERRORS_H_

#include <curl/curl.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "daemon/s3/s3_xml.h"

namespace gpuctl::s3 {

// Names a request in error messages, e.g. "S3 GetObject of key \"a/b\" in
// bucket \"traces\" at https://s3.example.com".
struct RequestTarget {
  std::string operation;  // "GetObject"
  std::string endpoint;
  std::string bucket;
  std::string subject;  // "key \"a/b\"", "prefix \"a/\""; may be empty
  std::string Describe() const;
};

// The absl code for an S3 error Code, falling back on the HTTP status when
// the code is empty or unknown:
//   NoSuchKey, NoSuchBucket, NoSuchUpload            NOT_FOUND
//   InvalidAccessKeyId, ExpiredToken, InvalidToken   UNAUTHENTICATED
//   SignatureDoesNotMatch, AccessDenied              PERMISSION_DENIED
//   SlowDown, InternalError, 5xx, 429                UNAVAILABLE
//   XAmzContentSHA256Mismatch, BadDigest             DATA_LOSS
//   redirects, RequestTimeTooSkewed, bad region      FAILED_PRECONDITION
absl::StatusCode StatusCodeForS3Error(absl::string_view s3_code, int http_status);

// Retried: 5xx (but 501), 429, and SlowDown / RequestTimeout / throttling
// codes. Never 401 or 403, whatever the code.
bool IsRetryableHttpError(int http_status, absl::string_view s3_code);
// Retried: failures to resolve, connect, send or receive, and timeouts.
bool IsRetryableTransportError(CURLcode code);

// "<target> failed: HTTP 403 SignatureDoesNotMatch: <message> (request id
// ...)"; `error` is the parsed body, when it was an S3 <Error>.
absl::Status HttpErrorStatus(const RequestTarget& target, int http_status,
                             const std::optional<S3ErrorBody>& error);
// "<target> failed: <curl's message>": UNAVAILABLE (refused, unresolvable,
// timed out, reset), FAILED_PRECONDITION for TLS verification failures.
absl::Status TransportErrorStatus(const RequestTarget& target, CURLcode code,
                                  absl::string_view curl_error);

}  // namespace gpuctl::s3

#endif  // GPUCTL_DAEMON_S3_S3_ERRORS_H_
