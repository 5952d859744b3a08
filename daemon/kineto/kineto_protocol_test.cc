#include "daemon/kineto/kineto_protocol.h"

#include <cstring>
#include <string>
#include <variant>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon::kineto {
namespace {

using ::testing::HasSubstr;

absl::Span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};  // NOLINT
}

// A `req` laid out field by field as libkineto's struct is, independently
// of EncodeRequest.
std::string HandMadeRequest(int32_t type, int64_t job, std::vector<int32_t> pids) {
  std::string d(kMetadataBytes + kRequestHeaderBytes + 4 * pids.size(), '\0');
  const uint64_t size = d.size() - kMetadataBytes;
  std::memcpy(d.data(), &size, 8);
  std::memcpy(d.data() + 8, "req", 3);
  const int32_t n = static_cast<int32_t>(pids.size());
  std::memcpy(d.data() + 40, &type, 4);
  std::memcpy(d.data() + 44, &n, 4);
  std::memcpy(d.data() + 48, &job, 8);
  if (!pids.empty()) std::memcpy(d.data() + 56, pids.data(), 4 * pids.size());
  return d;
}

TEST(KinetoProtocolTest, DecodesLibkinetoRequestByteForByte) {
  const std::string d = HandMadeRequest(3, 42, {1234, 77, 1});
  ASSERT_EQ(d.size(), 68u);
  auto decoded = DecodeDatagram(Bytes(d));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const auto& req = std::get<KinetoRequest>(*decoded);
  EXPECT_EQ(req.type, 3);
  EXPECT_TRUE(req.activities_idle());
  EXPECT_EQ(req.job_id, 42);
  EXPECT_THAT(req.pids, ::testing::ElementsAre(1234, 77, 1));
  EXPECT_EQ(EncodeRequest(req), d);
}

TEST(KinetoProtocolTest, BusyHeartbeatHasNoActivitiesBit) {
  auto decoded = DecodeDatagram(Bytes(HandMadeRequest(1, 0, {5})));
  ASSERT_TRUE(decoded.ok());
  EXPECT_FALSE(std::get<KinetoRequest>(*decoded).activities_idle());
}

TEST(KinetoProtocolTest, DecodesContext) {
  const std::string d = EncodeContext({.gpu = 2, .pid = 99, .job_id = 7});
  ASSERT_EQ(d.size(), 56u);
  auto decoded = DecodeDatagram(Bytes(d));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const auto& ctxt = std::get<KinetoContext>(*decoded);
  EXPECT_EQ(ctxt.gpu, 2);
  EXPECT_EQ(ctxt.pid, 99);
  EXPECT_EQ(ctxt.job_id, 7);
}

TEST(KinetoProtocolTest, RefusesMalformedDatagrams) {
  const std::string good = HandMadeRequest(2, 0, {10, 1});
  EXPECT_THAT(DecodeDatagram(Bytes(good.substr(0, 39))).status().message(),
              HasSubstr("shorter than its 40-byte header"));
  std::string bad_size = good;
  bad_size[0] = 9;
  EXPECT_THAT(DecodeDatagram(Bytes(bad_size)).status().message(), HasSubstr("announces 9"));
  EXPECT_THAT(DecodeDatagram(Bytes(EncodeRaw("evil", "1234"))).status().message(),
              HasSubstr("unknown kineto datagram type"));
  std::string unterminated = good;
  std::memset(unterminated.data() + 8, 'r', 32);
  EXPECT_THAT(DecodeDatagram(Bytes(unterminated)).status().message(),
              HasSubstr("not NUL-terminated"));
  // "reqX" is not "req": dynolog's prefix compare would take it.
  EXPECT_FALSE(DecodeDatagram(Bytes(EncodeRaw("reqX", good.substr(40)))).ok());
  std::string truncated_pids = EncodeRaw("req", good.substr(40, 20));
  EXPECT_THAT(DecodeDatagram(Bytes(truncated_pids)).status().message(), HasSubstr("for 2 pids"));
  EXPECT_THAT(DecodeDatagram(Bytes(HandMadeRequest(2, 0, {}))).status().message(),
              HasSubstr("names 0 pids"));
  EXPECT_THAT(DecodeDatagram(Bytes(HandMadeRequest(2, 0, {0}))).status().message(),
              HasSubstr("not positive"));
  EXPECT_THAT(DecodeDatagram(Bytes(HandMadeRequest(2, 0, {-4}))).status().message(),
              HasSubstr("not positive"));
  std::vector<int32_t> many(kMaxRequestPids + 1, 5);
  EXPECT_FALSE(DecodeDatagram(Bytes(HandMadeRequest(2, 0, many))).ok());
  std::string negative_n = good;
  const int32_t n = -1;
  std::memcpy(negative_n.data() + 44, &n, 4);
  EXPECT_THAT(DecodeDatagram(Bytes(negative_n)).status().message(), HasSubstr("names -1 pids"));
  EXPECT_FALSE(DecodeDatagram(Bytes(EncodeRaw("ctxt", "short"))).ok());
  std::vector<int32_t> most(kMaxRequestPids, 5);
  EXPECT_TRUE(DecodeDatagram(Bytes(HandMadeRequest(2, 0, most))).ok());
}

TEST(KinetoProtocolTest, RepliesAreMetadataAndText) {
  const std::string reply = EncodeRequestReply("A=1\n");
  ASSERT_EQ(reply.size(), 44u);
  uint64_t size = 0;
  std::memcpy(&size, reply.data(), 8);
  EXPECT_EQ(size, 4u);
  EXPECT_STREQ(reply.data() + 8, "req");
  EXPECT_EQ(reply.substr(40), "A=1\n");
  EXPECT_EQ(EncodeRequestReply("").size(), kMetadataBytes);
  const std::string ctxt = EncodeContextReply(3);
  ASSERT_EQ(ctxt.size(), 44u);
  EXPECT_STREQ(ctxt.data() + 8, "ctxt");
}

KinetoCaptureConfig TimeWindow() {
  KinetoCaptureConfig config;
  config.log_file = "/tmp/gpuctl-kineto-018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b.json";
  config.trace_id = "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b";
  config.start = absl::FromUnixMillis(1700000000123);
  config.duration = absl::Seconds(2);
  config.warmup_secs = 2;
  return config;
}

TEST(KinetoProtocolTest, BuildsTimeWindowConfig) {
  KinetoCaptureConfig config = TimeWindow();
  config.with_stack = true;
  auto text = BuildConfigText(config);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text,
            "ACTIVITIES_LOG_FILE=/tmp/gpuctl-kineto-018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b.json\n"
            "REQUEST_TRACE_ID=018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b\n"
            "ACTIVITIES_WARMUP_PERIOD_SECS=2\n"
            "ACTIVITIES_DURATION_MSECS=2000\n"
            "PROFILE_START_TIME=1700000000123\n"
            "PROFILE_WITH_STACK=true\n");
}

TEST(KinetoProtocolTest, BuildsIterationConfig) {
  KinetoCaptureConfig config = TimeWindow();
  config.iterations = 3;
  config.start_roundup = 10;
  auto text = BuildConfigText(config);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("ACTIVITIES_ITERATIONS=3\nPROFILE_START_ITERATION_ROUNDUP=10\n"));
  EXPECT_THAT(*text, HasSubstr("PROFILE_START_TIME=1700000000123\n"));
  config.duration = absl::ZeroDuration();
  text = BuildConfigText(config);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, ::testing::Not(HasSubstr("PROFILE_START_TIME")));
}

TEST(KinetoProtocolTest, RefusesValuesThatCouldInjectLines) {
  for (const char* path :
       {"/tmp/a.json\nACTIVITIES_LOG_FILE=/etc/x.json", "/etc/passwd.json", "/tmp/../etc/a.json",
        "/tmp/sub/a.json", "/tmp/.json", "/tmp/a.txt", "relative.json"}) {
    KinetoCaptureConfig config = TimeWindow();
    config.log_file = path;
    EXPECT_FALSE(BuildConfigText(config).ok()) << path;
  }
  KinetoCaptureConfig id = TimeWindow();
  id.trace_id = "abc\nPROFILE_WITH_STACK=true";
  EXPECT_FALSE(BuildConfigText(id).ok());
  KinetoCaptureConfig zero = TimeWindow();
  zero.duration = absl::ZeroDuration();
  EXPECT_FALSE(BuildConfigText(zero).ok());
  KinetoCaptureConfig warm = TimeWindow();
  warm.warmup_secs = -1;
  EXPECT_FALSE(BuildConfigText(warm).ok());
  KinetoCaptureConfig roundup = TimeWindow();
  roundup.iterations = 2;
  roundup.start_roundup = 0;
  EXPECT_FALSE(BuildConfigText(roundup).ok());
}

}  // namespace
}  // namespace gpuctl::daemon::kineto
