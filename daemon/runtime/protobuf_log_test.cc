#include "daemon/runtime/protobuf_log.h"

#include <string>
#include <vector>

#include "daemon/common/log.h"
#include "gmock/gmock.h"
#include "gpuctl/v1/service.pb.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ProtobufLogTest, LibprotobufLinesBecomeStructuredLines) {
  std::vector<std::string> lines;
  SetLogSinkForTesting([&](absl::string_view line) { lines.emplace_back(line); });
  RouteProtobufLogs();
  // A string field that is not UTF-8: libprotobuf logs it as it refuses
  // the parse.
  v1::GetTraceRequest request;
  EXPECT_FALSE(request.ParseFromString(std::string("\x0a\x01\xff", 3)));
  google::protobuf::SetLogHandler(nullptr);
  SetLogSinkForTesting(nullptr);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("level=warn msg=\"libprotobuf\""));
  EXPECT_THAT(lines[0], HasSubstr("gpuctl.v1.GetTraceRequest.trace_id"));
  EXPECT_THAT(lines[0], Not(HasSubstr("[libprotobuf")));
}

}  // namespace
}  // namespace gpuctl::daemon
