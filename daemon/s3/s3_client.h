#ifndef GPUCTL_DAEMON_S3_S3_CLIENT_H_
#define GPUCTL_DAEMON_S3_S3_CLIENT_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/s3/credentials.h"
#include "daemon/s3/object_body.h"
#include "daemon/s3/s3_config.h"
#include "daemon/s3/s3_types.h"

namespace gpuctl::s3 {

class HttpTransport;
struct HttpRequest;
struct HttpResponse;
struct RequestTarget;

// What S3Client takes from its surroundings; each part left empty gets the
// real thing. Tests replace them to run without waiting or environment.
struct S3ClientDeps {
  // Waits between attempts. Default: absl::SleepFor.
  std::function<void(absl::Duration)> sleep;
  // A uniformly random duration in [0, bound] (the backoff's full jitter).
  // Called concurrently. Default: absl::BitGen under a mutex.
  std::function<absl::Duration(absl::Duration bound)> jitter;
  // Where AWS_ACCESS_KEY_ID and friends come from. Default: ProcessEnv.
  EnvLookup env;
  // Fixed name resolutions, "host:port:address" as curl's --resolve.
  std::vector<std::string> resolve;
};

// A client for one bucket of an S3-compatible store (AWS S3, Ceph radosgw,
// MinIO), speaking the REST API over libcurl with SigV4 signing.
//
// Keys are whole object keys (S3Config::prefix is not added here; see
// trace_object_key.h). Every request is retried per S3Config on connection
// errors, 5xx, 429 and SlowDown, never on authentication errors. Errors
// name the operation, endpoint, bucket and key, and carry the HTTP status
// and S3's error Code and Message; codes follow StatusCodeForS3Error() in s3_errors.h.
//
// Thread-safe: any number of calls may run at once, each on its own libcurl
// handle and connection. Calls block; they never run callbacks on other
// threads.
class S3Client {
 public:
  // INVALID_ARGUMENT for a bad config, FAILED_PRECONDITION when no
  // credentials can be found. Sends nothing.
  static absl::StatusOr<std::unique_ptr<S3Client>> Create(S3Config config, S3ClientDeps deps = {});
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  const S3Config& config() const { return config_; }
  // Where the credentials come from ("environment", "file PATH [profile]").
  const std::string& credentials_source() const { return credentials_->source(); }
  // The object's URL (path-style or virtual-hosted per config), for logs
  // and messages.
  std::string ObjectUrl(absl::string_view key) const;

  // Stores the file at `path` as `key`, replacing any object there. Files
  // larger than multipart_threshold go up as a multipart upload, which is
  // aborted on failure. Streamed from the file (read twice: once to hash,
  // once to send), never held in memory; the file must not change meanwhile.
  absl::Status PutObjectFromFile(absl::string_view key, const std::string& path,
                                 const PutOptions& options = {});
  // As above, from memory.
  absl::Status PutObject(absl::string_view key, absl::string_view data,
                         const PutOptions& options = {});
  absl::Status PutObjectFromBody(absl::string_view key, const ObjectBody& body,
                                 const PutOptions& options = {});

  // Receives an object's bytes in order; a non-OK status stops the
  // download and is returned unchanged.
  using BodySink = absl::FunctionRef<absl::Status(absl::string_view chunk)>;

  // Streams the object, or `range` of it, to `sink`. Each byte reaches the
  // sink once: an attempt cut off midway resumes where it stopped, pinned to
  // the object's ETag, and fails with ABORTED if the object was replaced in
  // between. OUT_OF_RANGE when `range` starts past the end.
  absl::Status GetObject(absl::string_view key, BodySink sink,
                         std::optional<ByteRange> range = std::nullopt);
  // NOT_FOUND when there is no such key.
  absl::StatusOr<ObjectInfo> HeadObject(absl::string_view key);
  // One page of ListObjectsV2.
  absl::StatusOr<ListObjectsResult> ListObjects(const ListObjectsRequest& request);
  // Succeeds also when the key does not exist (as S3 does).
  absl::Status DeleteObject(absl::string_view key);

  // Multipart uploads by hand; PutObject* run them itself. Starts an upload
  // of `key` and returns its upload id.
  absl::StatusOr<std::string> CreateMultipartUpload(absl::string_view key,
                                                    const PutOptions& options = {});
  // One page of the uploads in progress (initiated, neither completed nor
  // aborted) whose keys start with `prefix` (empty: the whole bucket). The
  // first page has empty markers; the next ones take the previous page's
  // next_key_marker and next_upload_id_marker.
  absl::StatusOr<ListMultipartUploadsResult> ListMultipartUploads(
      absl::string_view prefix, absl::string_view key_marker = "",
      absl::string_view upload_id_marker = "");
  // Discards the upload and its parts. Succeeds also when the upload is
  // already gone (completed or aborted).
  absl::Status AbortMultipartUpload(absl::string_view key, absl::string_view upload_id);

 private:
  S3Client(S3Config config, S3Endpoint endpoint, S3ClientDeps deps,
           std::unique_ptr<CredentialsProvider> credentials);

  // The body of one page of a bucket listing (GET on the bucket with
  // `query`, which CanonicalQuery orders and encodes), retried like every
  // call; DATA_LOSS when the body is over the listing size bound.
  absl::StatusOr<std::string> GetBucketListing(
      const RequestTarget& target, std::vector<std::pair<std::string, std::string>> query);

  // Builds the request of each attempt; an error ends the attempts.
  using RequestFactory = absl::FunctionRef<absl::StatusOr<HttpRequest>()>;
  struct SendOptions {
    // CompleteMultipartUpload may answer HTTP 200 with an <Error> body.
    bool error_in_ok_body = false;
    // Set to the number of attempts made.
    int* attempts = nullptr;
  };
  // Performs the request until it succeeds, fails for good or runs out of
  // attempts, sleeping with backoff in between.
  absl::StatusOr<HttpResponse> Send(const RequestTarget& target, RequestFactory make_request,
                                    SendOptions options);
  struct AttemptOutcome {
    absl::Status status;
    bool retryable = false;
  };
  AttemptOutcome Classify(const RequestTarget& target, const HttpResponse& response,
                          const SendOptions& options) const;
  absl::Duration Backoff(int attempt) const;

  // INVALID_ARGUMENT unless 1-256 printable ASCII characters.
  static absl::Status ValidateContentType(absl::string_view value);
  RequestTarget Target(absl::string_view operation, absl::string_view key) const;
  std::string BucketUrl() const;

  absl::Status PutSingle(const RequestTarget& target, absl::string_view key, const ObjectBody& body,
                         const PutOptions& options);
  absl::Status PutMultipart(const RequestTarget& target, absl::string_view key,
                            const ObjectBody& body, const PutOptions& options);
  absl::StatusOr<std::string> UploadPart(absl::string_view key, const std::string& upload_id,
                                         const ObjectBody& body, uint64_t part_number,
                                         uint64_t offset, uint64_t length);
  absl::Status CompleteMultipart(absl::string_view key, const std::string& upload_id,
                                 const std::vector<std::string>& etags, uint64_t size);
  absl::Status AbortMultipart(absl::string_view key, absl::string_view upload_id);

  const S3Config config_;
  const S3Endpoint endpoint_;
  const std::string origin_;  // endpoint_.Origin(), as errors show it
  const S3ClientDeps deps_;
  const std::unique_ptr<CredentialsProvider> credentials_;
  const std::unique_ptr<HttpTransport> transport_;
};

}  // namespace gpuctl::s3

#endif  // GPUCTL_DAEMON_S3_S3_CLIENT_H_
