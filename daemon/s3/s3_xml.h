#ifndef GPUCTL_DAEMON_S3_S3_XML_H_
#define GPUCTL_DAEMON_S3_S3_XML_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/s3/s3_types.h"

namespace gpuctl::s3 {

// S3 response documents, parsed with libxml2 (no network, no entity
// expansion). Element names are matched by local name, so documents with
// or without S3's xmlns parse alike. Callers bound the body size.

// An S3 <Error> document.
struct S3ErrorBody {
  std::string code;  // "NoSuchKey", "SignatureDoesNotMatch", ...
  std::string message;
  std::string request_id;
  std::string endpoint;  // PermanentRedirect names the right one
};

// nullopt when `body` is not an <Error> document (empty, HTML, ...).
std::optional<S3ErrorBody> ParseS3Error(absl::string_view body);

// A ListObjectsV2 <ListBucketResult>. DATA_LOSS for a malformed document,
// including a truncated page without a continuation token.
absl::StatusOr<ListObjectsResult> ParseListObjectsV2(absl::string_view body);

// A <ListMultipartUploadsResult>. DATA_LOSS for a malformed document: an
// <Upload> without Key, UploadId or a valid Initiated time, or a truncated
// page without <NextKeyMarker>.
absl::StatusOr<ListMultipartUploadsResult> ParseListMultipartUploads(absl::string_view body);

// The UploadId of an <InitiateMultipartUploadResult>.
absl::StatusOr<std::string> ParseInitiateMultipartUpload(absl::string_view body);

// The <CompleteMultipartUpload> request body for parts 1..etags.size().
std::string BuildCompleteMultipartUpload(const std::vector<std::string>& etags);

// True when a CompleteMultipartUpload answer that came with HTTP 200 is a
// <CompleteMultipartUploadResult>; S3 may instead send an <Error> with 200.
bool IsCompleteMultipartUploadResult(absl::string_view body);

}  // namespace gpuctl::s3

#endif  // GPUCTL_DAEMON_S3_S3_XML_H_
