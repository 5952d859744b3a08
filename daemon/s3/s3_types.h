#ifndef GPUCTL_DAEMON_S3_S3_TYPES_H_
#define GPUCTL_DAEMON_S3_S3_TYPES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace gpuctl::s3 {

// What HeadObject reports.
struct ObjectInfo {
  uint64_t size = 0;
  std::string etag;  // as sent, quotes included
  std::string content_type;
  absl::Time last_modified = absl::InfinitePast();
};

// A byte range of an object: `length` bytes from `offset`, or to the end
// when `length` is unset.
struct ByteRange {
  uint64_t offset = 0;
  std::optional<uint64_t> length;
};

struct PutOptions {
  std::string content_type = "application/octet-stream";
};

struct ListObjectsRequest {
  // Keys starting with this; empty lists the whole bucket.
  std::string prefix;
  // Groups keys sharing the part after `prefix` up to this into
  // ListObjectsResult::common_prefixes ("/" lists one level). Empty: none.
  std::string delimiter;
  // From a previous result's next_continuation_token.
  std::string continuation_token;
  // 1-1000; S3 may return fewer.
  int max_keys = 1000;
};

struct ObjectSummary {
  std::string key;
  uint64_t size = 0;
  std::string etag;
  absl::Time last_modified = absl::InfinitePast();
};

// One page of ListObjectsV2, keys in ascending byte order.
struct ListObjectsResult {
  std::vector<ObjectSummary> objects;
  std::vector<std::string> common_prefixes;
  // Set only when more keys follow; pass it back for the next page.
  std::string next_continuation_token;
};

// A multipart upload that was initiated and neither completed nor aborted.
struct MultipartUpload {
  std::string key;
  std::string upload_id;
  absl::Time initiated = absl::InfinitePast();
};

// One page of ListMultipartUploads, ordered by key, then by initiation.
struct ListMultipartUploadsResult {
  std::vector<MultipartUpload> uploads;
  // Set only when more uploads follow; pass both back for the next page.
  bool truncated = false;
  std::string next_key_marker;
  std::string next_upload_id_marker;
};

}  // namespace gpuctl::s3

#endif  // GPUCTL_DAEMON_S3_S3_TYPES_H_
