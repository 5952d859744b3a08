#include "daemon/s3/s3_client.h"

#include <algorithm>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/common/log.h"
#include "daemon/s3/http_transport.h"
#include "daemon/s3/s3_errors.h"
#include "daemon/s3/s3_uri.h"
#include "daemon/s3/s3_xml.h"

namespace gpuctl::s3 {
namespace {

// One page of a bucket listing: 1000 keys or uploads with 1 KiB keys stay
// far below it.
constexpr size_t kMaxListBody = 16 << 20;
constexpr size_t kMaxContinuationToken = 4096;

absl::Status WithAttempts(const absl::Status& status, int attempts) {
  if (attempts <= 1) return status;
  return absl::Status(status.code(),
                      absl::StrCat(status.message(), " (after ", attempts, " attempts)"));
}

absl::Status Annotate(const RequestTarget& target, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat(target.Describe(), " failed: ", status.message()));
}

// A uniform [0, bound] source shared by concurrent calls.
class LockedJitter {
 public:
  absl::Duration operator()(absl::Duration bound) {
    int64_t max_ns = absl::ToInt64Nanoseconds(bound);
    if (max_ns <= 0) return absl::ZeroDuration();
    absl::MutexLock lock(&mu_);
    return absl::Nanoseconds(absl::Uniform<int64_t>(absl::IntervalClosed, gen_, 0, max_ns));
  }

 private:
  absl::Mutex mu_;
  absl::BitGen gen_ ABSL_GUARDED_BY(mu_);
};

S3ClientDeps WithDefaults(S3ClientDeps deps) {
  if (!deps.sleep) deps.sleep = [](absl::Duration d) { absl::SleepFor(d); };
  if (!deps.jitter) {
    auto jitter = std::make_shared<LockedJitter>();
    deps.jitter = [jitter](absl::Duration bound) { return (*jitter)(bound); };
  }
  if (!deps.env) deps.env = &ProcessEnv;
  return deps;
}

absl::Time ParseHttpDate(const std::string& text) {
  absl::Time t = absl::InfinitePast();
  std::string err;
  if (!absl::ParseTime("%a, %d %b %Y %H:%M:%S GMT", text, absl::UTCTimeZone(), &t, &err)) {
    return absl::InfinitePast();
  }
  return t;
}

}  // namespace

absl::StatusOr<std::unique_ptr<S3Client>> S3Client::Create(S3Config config, S3ClientDeps deps) {
  if (auto st = ValidateS3Config(config); !st.ok()) return st;
  auto endpoint = ParseS3Endpoint(config.endpoint);
  if (!endpoint.ok()) return endpoint.status();
  deps = WithDefaults(std::move(deps));
  auto credentials = CredentialsProvider::Create(config, deps.env);
  if (!credentials.ok()) return credentials.status();
  InitS3LibrariesOnce();
  return std::unique_ptr<S3Client>(new S3Client(std::move(config), *std::move(endpoint),
                                                std::move(deps), *std::move(credentials)));
}

S3Client::S3Client(S3Config config, S3Endpoint endpoint, S3ClientDeps deps,
                   std::unique_ptr<CredentialsProvider> credentials)
    : config_(std::move(config)),
      endpoint_(std::move(endpoint)),
      origin_(endpoint_.Origin()),
      deps_(std::move(deps)),
      credentials_(std::move(credentials)),
      transport_(std::make_unique<HttpTransport>(
          TransportOptions{config_.region, config_.connect_timeout, config_.idle_timeout,
                           config_.ca_file, deps_.resolve})) {}

S3Client::~S3Client() = default;

absl::Status S3Client::ValidateContentType(absl::string_view value) {
  if (value.empty() || value.size() > 256) {
    return absl::InvalidArgumentError("S3 content type must be 1-256 characters");
  }
  for (char c : value) {
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError("S3 content type must be printable ASCII");
    }
  }
  return absl::OkStatus();
}

std::string S3Client::BucketUrl() const {
  if (config_.path_style) return absl::StrCat(origin_, "/", config_.bucket);
  return endpoint_.Origin(absl::StrCat(config_.bucket, "."));
}

std::string S3Client::ObjectUrl(absl::string_view key) const {
  return absl::StrCat(BucketUrl(), "/", UriEncode(key, /*keep_slash=*/true));
}

RequestTarget S3Client::Target(absl::string_view operation, absl::string_view key) const {
  RequestTarget target{std::string(operation), origin_, config_.bucket, ""};
  if (!key.empty()) target.subject = absl::StrCat("key \"", key, "\"");
  return target;
}

absl::Duration S3Client::Backoff(int attempt) const {
  return ExponentialBackoff(config_.initial_backoff, config_.max_backoff, attempt);
}

S3Client::AttemptOutcome S3Client::Classify(const RequestTarget& target,
                                            const HttpResponse& response,
                                            const SendOptions& options) const {
  if (response.aborted_by_receiver) {
    return {absl::CancelledError(absl::StrCat(target.Describe(), " stopped by its receiver")),
            false};
  }
  if (!response.body_error.ok()) return {Annotate(target, response.body_error), false};
  // A server may refuse an upload and close before reading it all: its
  // answer counts, not the broken transfer.
  if (response.curl_code != CURLE_OK && response.status < 300) {
    return {TransportErrorStatus(target, response.curl_code, response.curl_error),
            IsRetryableTransportError(response.curl_code)};
  }
  if (response.status >= 200 && response.status < 300) {
    if (!options.error_in_ok_body || IsCompleteMultipartUploadResult(response.body)) {
      return {absl::OkStatus(), false};
    }
    std::optional<S3ErrorBody> error = ParseS3Error(response.body);
    if (!error.has_value()) {
      return {absl::DataLossError(absl::StrCat(target.Describe(), " failed: HTTP ", response.status,
                                               " with an unexpected body")),
              false};
    }
    return {HttpErrorStatus(target, response.status, error),
            IsRetryableHttpError(response.status, error->code)};
  }
  std::optional<S3ErrorBody> error = ParseS3Error(response.body);
  absl::Status status = HttpErrorStatus(target, response.status, error);
  if (absl::IsUnauthenticated(status) || absl::IsPermissionDenied(status)) {
    // Say which keys were refused: the fix is usually there.
    status = absl::Status(status.code(), absl::StrCat(status.message(), " (credentials from ",
                                                      credentials_->source(), ")"));
  }
  return {status, IsRetryableHttpError(response.status, error.has_value() ? error->code : "")};
}

absl::StatusOr<HttpResponse> S3Client::Send(const RequestTarget& target,
                                            RequestFactory make_request, SendOptions options) {
  for (int attempt = 1;; ++attempt) {
    if (options.attempts != nullptr) *options.attempts = attempt;
    absl::StatusOr<HttpRequest> request = make_request();
    if (!request.ok()) return request.status();
    HttpResponse response = transport_->Perform(*request, credentials_->Get());
    AttemptOutcome outcome = Classify(target, response, options);
    if (outcome.status.ok()) return response;
    if (!outcome.retryable || attempt >= config_.max_attempts) {
      return WithAttempts(outcome.status, attempt);
    }
    absl::Duration wait = deps_.jitter(Backoff(attempt));
    LogWarning("S3 request failed; retrying", {{"attempt", attempt},
                                               {"max_attempts", config_.max_attempts},
                                               {"retry_in_ms", absl::ToInt64Milliseconds(wait)},
                                               {"error", outcome.status.message()}});
    deps_.sleep(wait);
  }
}

absl::Status S3Client::PutObjectFromFile(absl::string_view key, const std::string& path,
                                         const PutOptions& options) {
  auto body = OpenFileBody(path);
  if (!body.ok()) return Annotate(Target("PutObject", key), body.status());
  return PutObjectFromBody(key, **body, options);
}

absl::Status S3Client::PutObject(absl::string_view key, absl::string_view data,
                                 const PutOptions& options) {
  return PutObjectFromBody(key, *MemoryBody(data), options);
}

absl::Status S3Client::PutObjectFromBody(absl::string_view key, const ObjectBody& body,
                                         const PutOptions& options) {
  if (auto st = ValidateObjectKey(key); !st.ok()) return st;
  if (auto st = ValidateContentType(options.content_type); !st.ok()) return st;
  RequestTarget target = Target("PutObject", key);
  if (body.size() > config_.multipart_threshold) return PutMultipart(target, key, body, options);
  return PutSingle(target, key, body, options);
}

absl::Status S3Client::PutSingle(const RequestTarget& target, absl::string_view key,
                                 const ObjectBody& body, const PutOptions& options) {
  auto sha256 = Sha256HexOfRange(body, 0, body.size());
  if (!sha256.ok()) return Annotate(target, sha256.status());
  auto response =
      Send(target,
           [&]() -> absl::StatusOr<HttpRequest> {
             HttpRequest req;
             req.method = "PUT";
             req.url = ObjectUrl(key);
             req.headers.push_back(absl::StrCat("Content-Type: ", options.content_type));
             req.payload_sha256 = *sha256;
             req.body = &body;
             req.body_length = body.size();
             return req;
           },
           {});
  return response.status();
}

absl::Status S3Client::GetObject(absl::string_view key, BodySink sink,
                                 std::optional<ByteRange> range) {
  if (auto st = ValidateObjectKey(key); !st.ok()) return st;
  if (range.has_value() && range->length.has_value() && *range->length == 0) {
    return absl::InvalidArgumentError("S3 GetObject range length must be positive");
  }
  RequestTarget target = Target("GetObject", key);
  const uint64_t start = range.has_value() ? range->offset : 0;
  const bool bounded = range.has_value() && range->length.has_value();
  uint64_t delivered = 0;
  std::string etag;
  absl::Status sink_status;
  bool range_ignored = false;
  auto response =
      Send(target,
           [&]() -> absl::StatusOr<HttpRequest> {
             if (delivered > 0 && etag.empty()) {
               return absl::UnavailableError(
                   absl::StrCat(target.Describe(), " broke off after ", delivered,
                                " bytes and cannot resume: the object has no ETag"));
             }
             HttpRequest req;
             req.method = "GET";
             req.url = ObjectUrl(key);
             const uint64_t from = start + delivered;
             if (range.has_value() || delivered > 0) {
               std::string spec = absl::StrCat("Range: bytes=", from, "-");
               if (bounded) absl::StrAppend(&spec, start + *range->length - 1);
               req.headers.push_back(std::move(spec));
             }
             if (delivered > 0) req.headers.push_back(absl::StrCat("If-Match: ", etag));
             const bool want_partial = from > 0 || bounded;
             req.on_body = [&, want_partial](const HttpResponse& r, absl::string_view chunk) {
               if (want_partial && r.status != 206) {
                 range_ignored = true;
                 return false;
               }
               if (etag.empty()) etag = r.Header("etag");
               sink_status = sink(chunk);
               if (!sink_status.ok()) return false;
               delivered += chunk.size();
               return true;
             };
             return req;
           },
           {});
  if (!sink_status.ok()) return sink_status;
  if (range_ignored) {
    return absl::UnimplementedError(
        absl::StrCat(target.Describe(), " failed: the server ignored the Range header"));
  }
  if (!response.ok() && delivered > 0 && absl::IsFailedPrecondition(response.status())) {
    return absl::AbortedError(
        absl::StrCat("object replaced while being read: ", response.status().message()));
  }
  return response.status();
}

absl::StatusOr<ObjectInfo> S3Client::HeadObject(absl::string_view key) {
  if (auto st = ValidateObjectKey(key); !st.ok()) return st;
  RequestTarget target = Target("HeadObject", key);
  auto response = Send(target,
                       [&]() -> absl::StatusOr<HttpRequest> {
                         HttpRequest req;
                         req.method = "HEAD";
                         req.url = ObjectUrl(key);
                         req.timeout = config_.request_timeout;
                         return req;
                       },
                       {});
  if (!response.ok()) return response.status();
  ObjectInfo info;
  std::string length = response->Header("content-length");
  if (!absl::SimpleAtoi(length, &info.size)) {
    return absl::DataLossError(
        absl::StrCat(target.Describe(), ": bad Content-Length \"", length, "\""));
  }
  info.etag = response->Header("etag");
  info.content_type = response->Header("content-type");
  info.last_modified = ParseHttpDate(response->Header("last-modified"));
  return info;
}

absl::StatusOr<ListObjectsResult> S3Client::ListObjects(const ListObjectsRequest& request) {
  if (request.max_keys < 1 || request.max_keys > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("S3 ListObjects max_keys ", request.max_keys, " is outside [1, 1000]"));
  }
  for (const std::string* field : {&request.prefix, &request.delimiter}) {
    if (!field->empty()) {
      if (auto st = ValidateObjectKey(*field); !st.ok()) return st;
    }
  }
  if (request.continuation_token.size() > kMaxContinuationToken) {
    return absl::InvalidArgumentError("S3 continuation token is too long");
  }
  RequestTarget target = Target("ListObjectsV2", "");
  target.subject = absl::StrCat("prefix \"", request.prefix, "\"");
  QueryParams query = {{"list-type", "2"}, {"max-keys", absl::StrCat(request.max_keys)}};
  if (!request.prefix.empty()) query.emplace_back("prefix", request.prefix);
  if (!request.delimiter.empty()) query.emplace_back("delimiter", request.delimiter);
  if (!request.continuation_token.empty()) {
    query.emplace_back("continuation-token", request.continuation_token);
  }
  auto body = GetBucketListing(target, std::move(query));
  if (!body.ok()) return body.status();
  auto result = ParseListObjectsV2(*body);
  if (!result.ok()) return Annotate(target, result.status());
  return result;
}

absl::StatusOr<std::string> S3Client::GetBucketListing(const RequestTarget& target,
                                                       QueryParams query) {
  const std::string url = absl::StrCat(BucketUrl(), config_.path_style ? "" : "/", "?",
                                       CanonicalQuery(std::move(query)));
  auto response = Send(target,
                       [&]() -> absl::StatusOr<HttpRequest> {
                         HttpRequest req;
                         req.method = "GET";
                         req.url = url;
                         req.timeout = config_.request_timeout;
                         req.max_body = kMaxListBody;
                         return req;
                       },
                       {});
  if (!response.ok()) return response.status();
  if (response->body_truncated) {
    return absl::DataLossError(
        absl::StrCat(target.Describe(), ": response over ", kMaxListBody, " bytes"));
  }
  return std::move(response->body);
}

absl::Status S3Client::DeleteObject(absl::string_view key) {
  if (auto st = ValidateObjectKey(key); !st.ok()) return st;
  auto response = Send(Target("DeleteObject", key),
                       [&]() -> absl::StatusOr<HttpRequest> {
                         HttpRequest req;
                         req.method = "DELETE";
                         req.url = ObjectUrl(key);
                         req.timeout = config_.request_timeout;
                         return req;
                       },
                       {});
  return response.status();
}

}  // namespace gpuctl::s3
