#include "daemon/s3/s3_xml.h"

#include <libxml/parser.h>
#include <libxml/tree.h>

#include <climits>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace gpuctl::s3 {
namespace {

struct DocDeleter {
  void operator()(xmlDoc* doc) const { xmlFreeDoc(doc); }
};
using XmlDoc = std::unique_ptr<xmlDoc, DocDeleter>;

XmlDoc Parse(absl::string_view body) {
  if (body.empty() || body.size() > INT_MAX) return nullptr;
  constexpr int kOptions = XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING;
  return XmlDoc(xmlReadMemory(body.data(), static_cast<int>(body.size()), "s3-response.xml",
                              nullptr, kOptions));
}

// libxml2 strings are UTF-8 in unsigned char.
const char* AsChars(const xmlChar* s) {
  return reinterpret_cast<const char*>(s);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
}

bool Named(const xmlNode* node, absl::string_view name) {
  return node->type == XML_ELEMENT_NODE && absl::string_view(AsChars(node->name)) == name;
}

const xmlNode* Root(const XmlDoc& doc, absl::string_view name) {
  if (doc == nullptr) return nullptr;
  const xmlNode* root = xmlDocGetRootElement(doc.get());
  return root != nullptr && Named(root, name) ? root : nullptr;
}

std::string Text(const xmlNode* node) {
  xmlChar* content = xmlNodeGetContent(node);
  if (content == nullptr) return "";
  std::string text(AsChars(content));
  xmlFree(content);
  return text;
}

const xmlNode* Child(const xmlNode* parent, absl::string_view name) {
  for (const xmlNode* c = parent->children; c != nullptr; c = c->next) {
    if (Named(c, name)) return c;
  }
  return nullptr;
}

std::string ChildText(const xmlNode* parent, absl::string_view name) {
  const xmlNode* c = Child(parent, name);
  return c == nullptr ? "" : Text(c);
}

absl::Status Malformed(absl::string_view what, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("malformed S3 ", what, " response: ", why));
}

absl::StatusOr<ObjectSummary> ParseContents(const xmlNode* node) {
  ObjectSummary object;
  object.key = ChildText(node, "Key");
  if (object.key.empty()) return Malformed("ListObjectsV2", "<Contents> without <Key>");
  std::string size = ChildText(node, "Size");
  if (!absl::SimpleAtoi(size, &object.size)) {
    return Malformed("ListObjectsV2", absl::StrCat("bad <Size> \"", size, "\" for ", object.key));
  }
  object.etag = ChildText(node, "ETag");
  std::string modified = ChildText(node, "LastModified");
  std::string err;
  if (!modified.empty() &&
      !absl::ParseTime(absl::RFC3339_full, modified, &object.last_modified, &err)) {
    return Malformed("ListObjectsV2", absl::StrCat("bad <LastModified> \"", modified, "\""));
  }
  return object;
}

absl::StatusOr<MultipartUpload> ParseUpload(const xmlNode* node) {
  constexpr absl::string_view kWhat = "ListMultipartUploads";
  MultipartUpload upload;
  upload.key = ChildText(node, "Key");
  if (upload.key.empty()) return Malformed(kWhat, "<Upload> without <Key>");
  upload.upload_id = ChildText(node, "UploadId");
  if (upload.upload_id.empty()) {
    return Malformed(kWhat, absl::StrCat("<Upload> of ", upload.key, " without <UploadId>"));
  }
  std::string initiated = ChildText(node, "Initiated");
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, initiated, &upload.initiated, &err)) {
    return Malformed(kWhat, absl::StrCat("bad <Initiated> \"", initiated, "\" for ", upload.key));
  }
  return upload;
}

}  // namespace

std::optional<S3ErrorBody> ParseS3Error(absl::string_view body) {
  XmlDoc doc = Parse(body);
  const xmlNode* root = Root(doc, "Error");
  if (root == nullptr) return std::nullopt;
  S3ErrorBody error;
  error.code = ChildText(root, "Code");
  error.message = ChildText(root, "Message");
  error.request_id = ChildText(root, "RequestId");
  error.endpoint = ChildText(root, "Endpoint");
  return error;
}

absl::StatusOr<ListObjectsResult> ParseListObjectsV2(absl::string_view body) {
  XmlDoc doc = Parse(body);
  const xmlNode* root = Root(doc, "ListBucketResult");
  if (root == nullptr) return Malformed("ListObjectsV2", "no <ListBucketResult> document");
  ListObjectsResult result;
  for (const xmlNode* c = root->children; c != nullptr; c = c->next) {
    if (Named(c, "Contents")) {
      auto object = ParseContents(c);
      if (!object.ok()) return object.status();
      result.objects.push_back(*std::move(object));
    } else if (Named(c, "CommonPrefixes")) {
      result.common_prefixes.push_back(ChildText(c, "Prefix"));
    }
  }
  std::string truncated = ChildText(root, "IsTruncated");
  if (truncated == "true") {
    result.next_continuation_token = ChildText(root, "NextContinuationToken");
    if (result.next_continuation_token.empty()) {
      return Malformed("ListObjectsV2", "truncated page without <NextContinuationToken>");
    }
  } else if (truncated != "false") {
    return Malformed("ListObjectsV2", absl::StrCat("bad <IsTruncated> \"", truncated, "\""));
  }
  return result;
}

absl::StatusOr<ListMultipartUploadsResult> ParseListMultipartUploads(absl::string_view body) {
  constexpr absl::string_view kWhat = "ListMultipartUploads";
  XmlDoc doc = Parse(body);
  const xmlNode* root = Root(doc, "ListMultipartUploadsResult");
  if (root == nullptr) return Malformed(kWhat, "no <ListMultipartUploadsResult> document");
  ListMultipartUploadsResult result;
  for (const xmlNode* c = root->children; c != nullptr; c = c->next) {
    if (!Named(c, "Upload")) continue;
    auto upload = ParseUpload(c);
    if (!upload.ok()) return upload.status();
    result.uploads.push_back(*std::move(upload));
  }
  std::string truncated = ChildText(root, "IsTruncated");
  if (truncated == "true") {
    result.truncated = true;
    result.next_key_marker = ChildText(root, "NextKeyMarker");
    result.next_upload_id_marker = ChildText(root, "NextUploadIdMarker");
    if (result.next_key_marker.empty()) {
      return Malformed(kWhat, "truncated page without <NextKeyMarker>");
    }
  } else if (truncated != "false") {
    return Malformed(kWhat, absl::StrCat("bad <IsTruncated> \"", truncated, "\""));
  }
  return result;
}

absl::StatusOr<std::string> ParseInitiateMultipartUpload(absl::string_view body) {
  XmlDoc doc = Parse(body);
  const xmlNode* root = Root(doc, "InitiateMultipartUploadResult");
  if (root == nullptr) {
    return Malformed("CreateMultipartUpload", "no <InitiateMultipartUploadResult> document");
  }
  std::string upload_id = ChildText(root, "UploadId");
  if (upload_id.empty()) return Malformed("CreateMultipartUpload", "empty <UploadId>");
  return upload_id;
}

std::string BuildCompleteMultipartUpload(const std::vector<std::string>& etags) {
  xmlDoc* doc = xmlNewDoc(BAD_CAST "1.0");
  xmlNode* root = xmlNewDocNode(doc, nullptr, BAD_CAST "CompleteMultipartUpload", nullptr);
  xmlDocSetRootElement(doc, root);
  for (size_t i = 0; i < etags.size(); ++i) {
    xmlNode* part = xmlNewChild(root, nullptr, BAD_CAST "Part", nullptr);
    std::string number = absl::StrCat(i + 1);
    // xmlNewTextChild escapes the content (ETags carry quotes).
    xmlNewTextChild(part, nullptr, BAD_CAST "PartNumber", BAD_CAST number.c_str());
    xmlNewTextChild(part, nullptr, BAD_CAST "ETag", BAD_CAST etags[i].c_str());
  }
  xmlChar* out = nullptr;
  int size = 0;
  xmlDocDumpMemoryEnc(doc, &out, &size, "UTF-8");
  std::string xml(AsChars(out), static_cast<size_t>(size));
  xmlFree(out);
  xmlFreeDoc(doc);
  return xml;
}

bool IsCompleteMultipartUploadResult(absl::string_view body) {
  XmlDoc doc = Parse(body);
  return Root(doc, "CompleteMultipartUploadResult") != nullptr;
}

}  // namespace gpuctl::s3
