#include "daemon/s3/s3_errors.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace gpuctl::s3 {
namespace {

const absl::flat_hash_map<absl::string_view, absl::StatusCode>& S3CodeTable() {
  using C = absl::StatusCode;
  static const auto* table = new absl::flat_hash_map<absl::string_view, absl::StatusCode>{
      {"NoSuchKey", C::kNotFound},
      {"NoSuchBucket", C::kNotFound},
      {"NoSuchUpload", C::kNotFound},
      {"InvalidAccessKeyId", C::kUnauthenticated},
      {"ExpiredToken", C::kUnauthenticated},
      {"InvalidToken", C::kUnauthenticated},
      {"TokenRefreshRequired", C::kUnauthenticated},
      {"MissingSecurityHeader", C::kUnauthenticated},
      {"SignatureDoesNotMatch", C::kPermissionDenied},
      {"AccessDenied", C::kPermissionDenied},
      {"AllAccessDisabled", C::kPermissionDenied},
      {"AccountProblem", C::kPermissionDenied},
      {"SlowDown", C::kUnavailable},
      {"ServiceUnavailable", C::kUnavailable},
      {"InternalError", C::kUnavailable},
      {"RequestTimeout", C::kUnavailable},
      {"Throttling", C::kUnavailable},
      {"ThrottlingException", C::kUnavailable},
      {"RequestThrottled", C::kUnavailable},
      {"XAmzContentSHA256Mismatch", C::kDataLoss},
      {"BadDigest", C::kDataLoss},
      {"IncompleteBody", C::kDataLoss},
      {"InvalidRange", C::kOutOfRange},
      {"PreconditionFailed", C::kFailedPrecondition},
      {"PermanentRedirect", C::kFailedPrecondition},
      {"TemporaryRedirect", C::kFailedPrecondition},
      {"AuthorizationHeaderMalformed", C::kFailedPrecondition},
      {"RequestTimeTooSkewed", C::kFailedPrecondition},
      {"InvalidBucketName", C::kFailedPrecondition},
      {"QuotaExceeded", C::kResourceExhausted},
      {"NotImplemented", C::kUnimplemented},
  };
  return *table;
}

absl::StatusCode StatusCodeForHttp(int status) {
  using C = absl::StatusCode;
  switch (status) {
    case 400:
      return C::kInvalidArgument;
    case 401:
      return C::kUnauthenticated;
    case 403:
      return C::kPermissionDenied;
    case 404:
      return C::kNotFound;
    case 409:
      return C::kAborted;
    case 412:
      return C::kFailedPrecondition;
    case 416:
      return C::kOutOfRange;
    case 429:
      return C::kUnavailable;
    case 501:
      return C::kUnimplemented;
    default:
      break;
  }
  if (status >= 500) return C::kUnavailable;
  if (status >= 300 && status < 400) return C::kFailedPrecondition;
  return C::kUnknown;
}

}  // namespace

std::string RequestTarget::Describe() const {
  std::string out = absl::StrCat("S3 ", operation);
  if (!subject.empty()) absl::StrAppend(&out, " of ", subject);
  absl::StrAppend(&out, " in bucket \"", bucket, "\" at ", endpoint);
  return out;
}

absl::StatusCode StatusCodeForS3Error(absl::string_view s3_code, int http_status) {
  const auto& table = S3CodeTable();
  if (auto it = table.find(s3_code); it != table.end()) return it->second;
  return StatusCodeForHttp(http_status);
}

bool IsRetryableHttpError(int http_status, absl::string_view s3_code) {
  if (http_status == 401 || http_status == 403) return false;
  if (http_status == 429 || (http_status >= 500 && http_status != 501)) return true;
  return s3_code == "SlowDown" || s3_code == "RequestTimeout" || s3_code == "Throttling" ||
         s3_code == "ThrottlingException" || s3_code == "RequestThrottled" ||
         s3_code == "InternalError" || s3_code == "ServiceUnavailable";
}

bool IsRetryableTransportError(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

absl::Status HttpErrorStatus(const RequestTarget& target, int http_status,
                             const std::optional<S3ErrorBody>& error) {
  std::string code = error.has_value() ? error->code : "";
  std::string msg = absl::StrCat(target.Describe(), " failed: HTTP ", http_status);
  if (!code.empty()) absl::StrAppend(&msg, " ", code);
  if (error.has_value() && !error->message.empty()) absl::StrAppend(&msg, ": ", error->message);
  if (error.has_value() && !error->endpoint.empty()) {
    absl::StrAppend(&msg, " (use endpoint ", error->endpoint, ")");
  }
  if (error.has_value() && !error->request_id.empty()) {
    absl::StrAppend(&msg, " (request id ", error->request_id, ")");
  }
  return absl::Status(StatusCodeForS3Error(code, http_status), msg);
}

absl::Status TransportErrorStatus(const RequestTarget& target, CURLcode code,
                                  absl::string_view curl_error) {
  absl::string_view detail = curl_error.empty() ? curl_easy_strerror(code) : curl_error;
  std::string msg = absl::StrCat(target.Describe(), " failed: ", detail);
  switch (code) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
      return absl::FailedPreconditionError(msg);
    default:
      return absl::UnavailableError(msg);
  }
}

}  // namespace gpuctl::s3
