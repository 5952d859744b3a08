#include "daemon/s3/s3_xml.h"

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace gpuctl::s3 {
namespace {

TEST(S3XmlTest, ParsesErrors) {
  auto e = ParseS3Error(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>NoSuchKey</Code>"
      "<Message>The specified key does not exist.</Message><Key>a/b</Key>"
      "<RequestId>tx000001</RequestId><HostId>h</HostId></Error>");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, "NoSuchKey");
  EXPECT_EQ(e->message, "The specified key does not exist.");
  EXPECT_EQ(e->request_id, "tx000001");

  EXPECT_FALSE(ParseS3Error("").has_value());
  EXPECT_FALSE(ParseS3Error("<html><body>502 Bad Gateway</body></html>").has_value());
  EXPECT_FALSE(ParseS3Error("<Error><Code>unterminated").has_value());
  EXPECT_FALSE(ParseS3Error("not xml at all").has_value());
}

TEST(S3XmlTest, ParsesListObjectsV2) {
  auto r = ParseListObjectsV2(R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>traces</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <Contents><Key>p/a&amp;b.json</Key><LastModified>2024-01-02T03:04:05.678Z</LastModified>
    <ETag>&quot;abc&quot;</ETag><Size>12345678901</Size><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>p/c</Key><LastModified>2024-01-02T03:04:06.000Z</LastModified>
    <ETag>"def-2"</ETag><Size>0</Size></Contents>
  <CommonPrefixes><Prefix>p/2024/</Prefix></CommonPrefixes>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
</ListBucketResult>)");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->objects.size(), 2u);
  EXPECT_EQ(r->objects[0].key, "p/a&b.json");
  EXPECT_EQ(r->objects[0].size, 12345678901u);
  EXPECT_EQ(r->objects[0].etag, "\"abc\"");
  EXPECT_EQ(r->objects[0].last_modified,
            absl::FromUnixSeconds(1704164645) + absl::Milliseconds(678));
  EXPECT_EQ(r->objects[1].size, 0u);
  ASSERT_EQ(r->common_prefixes.size(), 1u);
  EXPECT_EQ(r->common_prefixes[0], "p/2024/");
  EXPECT_EQ(r->next_continuation_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
}

TEST(S3XmlTest, LastPageHasNoToken) {
  auto r = ParseListObjectsV2(
      "<ListBucketResult><IsTruncated>false</IsTruncated>"
      "<NextContinuationToken>stale</NextContinuationToken></ListBucketResult>");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->objects.empty());
  EXPECT_EQ(r->next_continuation_token, "");
}

TEST(S3XmlTest, RejectsMalformedLists) {
  for (const char* bad : {
           "",
           "<Error><Code>X</Code></Error>",
           "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
           "<ListBucketResult><IsTruncated>maybe</IsTruncated></ListBucketResult>",
           "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Size>1</Size>"
           "</Contents></ListBucketResult>",
           "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>k</Key>"
           "<Size>-1</Size></Contents></ListBucketResult>",
           "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>k</Key>"
           "<Size>1</Size><LastModified>yesterday</LastModified></Contents></ListBucketResult>",
       }) {
    auto r = ParseListObjectsV2(bad);
    EXPECT_TRUE(absl::IsDataLoss(r.status())) << bad << ": " << r.status();
  }
}

TEST(S3XmlTest, EntitiesAreNotExpanded) {
  auto r = ParseListObjectsV2(
      "<?xml version=\"1.0\"?><!DOCTYPE l [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"
      "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>&x;</Key>"
      "<Size>1</Size></Contents></ListBucketResult>");
  if (r.ok()) {
    for (const auto& o : r->objects) EXPECT_EQ(o.key.find("root:"), std::string::npos);
  }
}

TEST(S3XmlTest, MultipartDocuments) {
  auto id = ParseInitiateMultipartUpload(
      "<InitiateMultipartUploadResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Bucket>b</Bucket><Key>k</Key><UploadId>2~abc/def</UploadId>"
      "</InitiateMultipartUploadResult>");
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, "2~abc/def");
  EXPECT_FALSE(ParseInitiateMultipartUpload(
                   "<InitiateMultipartUploadResult></InitiateMultipartUploadResult>")
                   .ok());

  std::string xml = BuildCompleteMultipartUpload({"\"e1\"", "\"e2&<\""});
  EXPECT_NE(xml.find("<CompleteMultipartUpload>"), std::string::npos) << xml;
  EXPECT_NE(xml.find("<Part><PartNumber>1</PartNumber><ETag>\"e1\"</ETag></Part>"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<PartNumber>2</PartNumber><ETag>\"e2&amp;&lt;\"</ETag>"), std::string::npos)
      << xml;

  EXPECT_TRUE(IsCompleteMultipartUploadResult(
      "<CompleteMultipartUploadResult><ETag>\"x-2\"</ETag></CompleteMultipartUploadResult>"));
  EXPECT_FALSE(IsCompleteMultipartUploadResult("<Error><Code>InternalError</Code></Error>"));
  EXPECT_FALSE(IsCompleteMultipartUploadResult(""));
}

TEST(S3XmlTest, ParsesListMultipartUploads) {
  auto r = ParseListMultipartUploads(R"(<?xml version="1.0" encoding="UTF-8"?>
<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Bucket>traces</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker>
  <NextKeyMarker>p/b&amp;c</NextKeyMarker><NextUploadIdMarker>2~xyz</NextUploadIdMarker>
  <Prefix>p/</Prefix><MaxUploads>2</MaxUploads><IsTruncated>true</IsTruncated>
  <Upload><Key>p/a</Key><UploadId>2~abc</UploadId>
    <Initiator><ID>u</ID><DisplayName>u</DisplayName></Initiator>
    <StorageClass>STANDARD</StorageClass><Initiated>2024-01-02T03:04:05.678Z</Initiated></Upload>
  <Upload><Key>p/b&amp;c</Key><UploadId>2~xyz</UploadId>
    <Initiated>2024-01-02T03:04:06.000Z</Initiated></Upload>
</ListMultipartUploadsResult>)");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->uploads.size(), 2u);
  EXPECT_EQ(r->uploads[0].key, "p/a");
  EXPECT_EQ(r->uploads[0].upload_id, "2~abc");
  EXPECT_EQ(r->uploads[0].initiated, absl::FromUnixMillis(1704164645678));
  EXPECT_EQ(r->uploads[1].key, "p/b&c");
  EXPECT_TRUE(r->truncated);
  EXPECT_EQ(r->next_key_marker, "p/b&c");
  EXPECT_EQ(r->next_upload_id_marker, "2~xyz");

  auto empty = ParseListMultipartUploads(
      "<ListMultipartUploadsResult><Bucket>traces</Bucket><IsTruncated>false</IsTruncated>"
      "</ListMultipartUploadsResult>");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->uploads.empty());
  EXPECT_FALSE(empty->truncated);
  EXPECT_TRUE(empty->next_key_marker.empty());
}

TEST(S3XmlTest, RejectsMalformedListMultipartUploads) {
  const char* bad[] = {
      "",
      "not xml",
      "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>",
      "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>",
      "<ListMultipartUploadsResult></ListMultipartUploadsResult>",
      "<ListMultipartUploadsResult><IsTruncated>true</IsTruncated></ListMultipartUploadsResult>",
      "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated><Upload><UploadId>u</UploadId>"
      "<Initiated>2024-01-02T03:04:05Z</Initiated></Upload></ListMultipartUploadsResult>",
      "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated><Upload><Key>k</Key>"
      "<Initiated>2024-01-02T03:04:05Z</Initiated></Upload></ListMultipartUploadsResult>",
      "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated><Upload><Key>k</Key>"
      "<UploadId>u</UploadId><Initiated>yesterday</Initiated></Upload>"
      "</ListMultipartUploadsResult>",
      "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated><Upload><Key>k</Key>"
      "<UploadId>u</UploadId></Upload></ListMultipartUploadsResult>",
  };
  for (const char* body : bad) {
    auto r = ParseListMultipartUploads(body);
    EXPECT_TRUE(absl::IsDataLoss(r.status())) << body << ": " << r.status();
    EXPECT_NE(r.status().message().find("malformed S3 ListMultipartUploads response"),
              std::string::npos)
        << r.status();
  }
}

}  // namespace
}  // namespace gpuctl::s3
