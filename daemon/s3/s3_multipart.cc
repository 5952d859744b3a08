// S3Client's multipart upload: CreateMultipartUpload, UploadPart for each
// part in order, CompleteMultipartUpload; AbortMultipartUpload on failure.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/s3/http_transport.h"
#include "daemon/s3/s3_client.h"
#include "daemon/s3/s3_errors.h"
#include "daemon/s3/s3_uri.h"
#include "daemon/s3/s3_xml.h"

namespace gpuctl::s3 {
namespace {

constexpr size_t kMaxControlBody = 1 << 20;
// Upload ids are opaque; S3's are about 100 bytes, radosgw's shorter.
constexpr size_t kMaxUploadId = 1024;

uint64_t CeilDiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace

absl::Status S3Client::PutMultipart(const RequestTarget& target, absl::string_view key,
                                    const ObjectBody& body, const PutOptions& options) {
  const uint64_t size = body.size();
  const uint64_t part_size = std::max(config_.part_size, CeilDiv(size, kMaxParts));
  if (part_size > kMaxPartSize) {
    return absl::InvalidArgumentError(
        absl::StrCat(target.Describe(), ": ", size, " bytes exceed S3's largest object"));
  }
  const uint64_t parts = CeilDiv(size, part_size);
  auto upload_id = CreateMultipartUpload(key, options);
  if (!upload_id.ok()) return upload_id.status();

  absl::Status failure;
  std::vector<std::string> etags;
  etags.reserve(parts);
  for (uint64_t n = 1; n <= parts && failure.ok(); ++n) {
    const uint64_t offset = (n - 1) * part_size;
    auto etag = UploadPart(key, *upload_id, body, n, offset, std::min(part_size, size - offset));
    if (etag.ok()) {
      etags.push_back(*std::move(etag));
    } else {
      failure = etag.status();
    }
  }
  if (failure.ok()) failure = CompleteMultipart(key, *upload_id, etags, size);
  if (failure.ok()) return absl::OkStatus();

  absl::Status aborted = AbortMultipart(key, *upload_id);
  if (!aborted.ok()) {
    LogWarning(
        "S3 multipart upload could not be aborted; its parts stay stored until a gpuctld "
        "start over an hour from now aborts it, or a bucket lifecycle rule removes them",
        {{"key", key}, {"upload_id", *upload_id}, {"error", aborted.message()}});
    return absl::Status(failure.code(),
                        absl::StrCat(failure.message(), "; aborting upload ", *upload_id,
                                     " failed too: ", aborted.message()));
  }
  return failure;
}

absl::StatusOr<std::string> S3Client::CreateMultipartUpload(absl::string_view key,
                                                            const PutOptions& options) {
  if (auto st = ValidateObjectKey(key); !st.ok()) return st;
  if (auto st = ValidateContentType(options.content_type); !st.ok()) return st;
  RequestTarget target = Target("CreateMultipartUpload", key);
  const std::string url = absl::StrCat(ObjectUrl(key), "?", CanonicalQuery({{"uploads", ""}}));
  auto created = Send(target,
                      [&]() -> absl::StatusOr<HttpRequest> {
                        HttpRequest req;
                        req.method = "POST";
                        req.url = url;
                        req.headers.push_back(absl::StrCat("Content-Type: ", options.content_type));
                        req.timeout = config_.request_timeout;
                        req.max_body = kMaxControlBody;
                        return req;
                      },
                      {});
  if (!created.ok()) return created.status();
  auto upload_id = ParseInitiateMultipartUpload(created->body);
  if (!upload_id.ok()) {
    return absl::Status(upload_id.status().code(),
                        absl::StrCat(target.Describe(), ": ", upload_id.status().message()));
  }
  if (upload_id->size() > kMaxUploadId) {
    return absl::DataLossError(
        absl::StrCat(target.Describe(), ": upload id over ", kMaxUploadId, " bytes"));
  }
  return upload_id;
}

absl::StatusOr<ListMultipartUploadsResult> S3Client::ListMultipartUploads(
    absl::string_view prefix, absl::string_view key_marker, absl::string_view upload_id_marker) {
  for (absl::string_view field : {prefix, key_marker}) {
    if (!field.empty()) {
      if (auto st = ValidateObjectKey(field); !st.ok()) return st;
    }
  }
  if (upload_id_marker.size() > kMaxUploadId) {
    return absl::InvalidArgumentError("S3 upload id marker is too long");
  }
  RequestTarget target = Target("ListMultipartUploads", "");
  target.subject = absl::StrCat("prefix \"", prefix, "\"");
  QueryParams query = {{"uploads", ""}};
  if (!prefix.empty()) query.emplace_back("prefix", std::string(prefix));
  if (!key_marker.empty()) query.emplace_back("key-marker", std::string(key_marker));
  if (!upload_id_marker.empty()) {
    query.emplace_back("upload-id-marker", std::string(upload_id_marker));
  }
  auto body = GetBucketListing(target, std::move(query));
  if (!body.ok()) return body.status();
  auto result = ParseListMultipartUploads(*body);
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat(target.Describe(), " failed: ", result.status().message()));
  }
  return result;
}

absl::Status S3Client::AbortMultipartUpload(absl::string_view key, absl::string_view upload_id) {
  if (auto st = ValidateObjectKey(key); !st.ok()) return st;
  if (upload_id.empty() || upload_id.size() > kMaxUploadId) {
    return absl::InvalidArgumentError(
        absl::StrCat("S3 upload id must be 1-", kMaxUploadId, " bytes"));
  }
  return AbortMultipart(key, upload_id);
}

absl::StatusOr<std::string> S3Client::UploadPart(absl::string_view key,
                                                 const std::string& upload_id,
                                                 const ObjectBody& body, uint64_t part_number,
                                                 uint64_t offset, uint64_t length) {
  RequestTarget target = Target("UploadPart", key);
  absl::StrAppend(&target.subject, " part ", part_number);
  auto sha256 = Sha256HexOfRange(body, offset, length);
  if (!sha256.ok()) {
    return absl::Status(sha256.status().code(),
                        absl::StrCat(target.Describe(), " failed: ", sha256.status().message()));
  }
  const std::string url = absl::StrCat(
      ObjectUrl(key), "?",
      CanonicalQuery({{"partNumber", absl::StrCat(part_number)}, {"uploadId", upload_id}}));
  auto response = Send(target,
                       [&]() -> absl::StatusOr<HttpRequest> {
                         HttpRequest req;
                         req.method = "PUT";
                         req.url = url;
                         req.payload_sha256 = *sha256;
                         req.body = &body;
                         req.body_offset = offset;
                         req.body_length = length;
                         return req;
                       },
                       {});
  if (!response.ok()) return response.status();
  std::string etag = response->Header("etag");
  if (etag.empty()) {
    return absl::DataLossError(absl::StrCat(target.Describe(), ": response has no ETag"));
  }
  return etag;
}

absl::Status S3Client::CompleteMultipart(absl::string_view key, const std::string& upload_id,
                                         const std::vector<std::string>& etags, uint64_t size) {
  RequestTarget target = Target("CompleteMultipartUpload", key);
  const std::string xml = BuildCompleteMultipartUpload(etags);
  std::unique_ptr<ObjectBody> body = MemoryBody(xml);
  const std::string sha256 = Sha256Hex(xml);
  const std::string url =
      absl::StrCat(ObjectUrl(key), "?", CanonicalQuery({{"uploadId", upload_id}}));
  int attempts = 0;
  auto response = Send(target,
                       [&]() -> absl::StatusOr<HttpRequest> {
                         HttpRequest req;
                         req.method = "POST";
                         req.url = url;
                         req.headers.push_back("Content-Type: application/xml");
                         req.payload_sha256 = sha256;
                         req.body = body.get();
                         req.body_length = body->size();
                         req.max_body = kMaxControlBody;
                         // Assembling a large object takes a while; S3 keeps the connection
                         // alive meanwhile, so only the idle timeout applies.
                         return req;
                       },
                       {.error_in_ok_body = true, .attempts = &attempts});
  if (response.ok() || attempts <= 1 || !absl::IsNotFound(response.status())) {
    return response.status();
  }
  // An earlier attempt may have completed the upload with its answer lost:
  // then the upload is gone and the object is there.
  auto info = HeadObject(key);
  if (info.ok() && info->size == size) {
    LogInfo("S3 multipart upload had completed on an earlier attempt",
            {{"key", key}, {"upload_id", upload_id}});
    return absl::OkStatus();
  }
  return response.status();
}

absl::Status S3Client::AbortMultipart(absl::string_view key, absl::string_view upload_id) {
  const std::string url =
      absl::StrCat(ObjectUrl(key), "?", CanonicalQuery({{"uploadId", std::string(upload_id)}}));
  auto response = Send(Target("AbortMultipartUpload", key),
                       [&]() -> absl::StatusOr<HttpRequest> {
                         HttpRequest req;
                         req.method = "DELETE";
                         req.url = url;
                         req.timeout = config_.request_timeout;
                         return req;
                       },
                       {});
  // NoSuchUpload: nothing left to abort.
  if (absl::IsNotFound(response.status())) return absl::OkStatus();
  return response.status();
}

}  // namespace gpuctl::s3
