#include "daemon/rpc/raw_messages.h"

#include <string>
#include <vector>

#include "daemon/rpc/status_util.h"
#include "gmock/gmock.h"
#include "gpuctl/v1/service.pb.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;

grpc::ByteBuffer Bytes(const std::string& data) {
  grpc::Slice slice(data);
  return grpc::ByteBuffer(&slice, 1);
}

std::string Data(const grpc::ByteBuffer& bytes) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(bytes.Dump(&slices).ok());
  std::string data;
  for (const grpc::Slice& s : slices) data.append(s.begin(), s.end());
  return data;
}

TEST(RawMessagesTest, ARequestRoundTrips) {
  v1::GetTraceRequest sent;
  sent.set_trace_id("018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b");
  sent.add_files("manifest.json");
  v1::GetTraceRequest parsed;
  ASSERT_TRUE(ParseRequest("GetTrace", SerializeReply(sent), &parsed).ok());
  EXPECT_EQ(parsed.trace_id(), sent.trace_id());
  EXPECT_EQ(parsed.files(0), "manifest.json");
  EXPECT_EQ(Data(SerializeReply(v1::GetStatusRequest())), "");
}

TEST(RawMessagesTest, SaysWhichStringFieldIsNotUtf8) {
  v1::TraceRequest request;
  // selector (1) { labels (4) { key (1): "k", value (2): "\xed\xa0\x80" } }:
  // a UTF-16 surrogate encoded as UTF-8, which UTF-8 forbids.
  const std::string entry("\x0a\x01k\x12\x03\xed\xa0\x80", 8);
  const std::string selector = std::string("\x22") + static_cast<char>(entry.size()) + entry;
  const std::string wire = std::string("\x0a") + static_cast<char>(selector.size()) + selector;
  absl::Status status = ParseRequest("Trace", Bytes(wire), &request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "Trace request: not a valid gpuctl.v1.TraceRequest (field selector: field labels: "
            "field value is not valid UTF-8)");
}

TEST(RawMessagesTest, ValidUtf8AndUnknownFieldsAreNoFailure) {
  // "é", a 4-byte character, and an unknown field 15.
  const std::string wire("\x0a\x06\xc3\xa9\xf0\x9f\x98\x80\x78\x01", 10);
  v1::GetTraceRequest request;
  EXPECT_TRUE(ParseRequest("GetTrace", Bytes(wire), &request).ok());
  EXPECT_EQ(DescribeParseFailure(*v1::GetTraceRequest::descriptor(), wire), "");
}

TEST(RawMessagesTest, TruncatedBytesAreCalledSo) {
  v1::GetTraceRequest sent;
  sent.set_trace_id("018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b");
  std::string wire = sent.SerializeAsString();
  wire.resize(wire.size() / 2);
  v1::GetTraceRequest parsed;
  absl::Status status = ParseRequest("GetTrace", Bytes(wire), &parsed);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("garbage or truncated"));
}

TEST(StatusUtilTest, KeepsTheCodeAndBoundsTheMessage) {
  grpc::Status status = ToGrpcStatus(absl::NotFoundError(std::string(10 << 10, 'x')));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_LT(status.error_message().size(), 1024u);
  EXPECT_THAT(status.error_message(), HasSubstr("(10240 bytes)"));
  EXPECT_EQ(ToGrpcStatus(absl::InvalidArgumentError("short")).error_message(), "short");
}

}  // namespace
}  // namespace gpuctl::daemon
