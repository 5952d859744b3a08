// Retries: which failures are retried, how often, and the backoff between.

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/s3/s3_client.h"
#include "daemon/s3/testing/loopback_http_server.h"
#include "daemon/s3/testing/s3_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::s3 {
namespace {

using testing::CannedResponse;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::LoopbackHttpServer;
using testing::RecordedRequest;
using testing::S3ErrorResponse;

// Answers with `failure` for the first `failures` requests, then 200.
LoopbackHttpServer::Handler FailThenSucceed(int failures, CannedResponse failure) {
  auto count = std::make_shared<int>(0);
  return [=](const RecordedRequest&) {
    if ((*count)++ < failures) return failure;
    CannedResponse ok;
    ok.body = "payload";
    return ok;
  };
}

class S3RetryTest : public ::testing::Test {
 protected:
  absl::Status Fetch(const LoopbackHttpServer& server, int max_attempts = 3) {
    S3Config config = testing::LoopbackConfig(server);
    config.max_attempts = max_attempts;
    auto client = S3Client::Create(config, waits_.Deps());
    if (!client.ok()) return client.status();
    got_.clear();
    return (*client)->GetObject("k", [this](absl::string_view chunk) {
      got_.append(chunk.data(), chunk.size());
      return absl::OkStatus();
    });
  }

  testing::RecordedWaits waits_;
  std::string got_;
};

TEST_F(S3RetryTest, TwoServiceUnavailableThenSuccess) {
  CannedResponse unavailable;
  unavailable.status = 503;
  LoopbackHttpServer server(FailThenSucceed(2, unavailable));
  absl::Status st = Fetch(server);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(got_, "payload");
  EXPECT_EQ(server.requests().size(), 3u);
  // Full jitter is drawn from [0, cap]; the fake returns the cap itself.
  EXPECT_THAT(waits_.waits(), ElementsAre(absl::Milliseconds(100), absl::Milliseconds(200)));
}

TEST_F(S3RetryTest, ThrottlingIsRetried) {
  for (const CannedResponse& failure :
       {S3ErrorResponse(503, "SlowDown", "Please reduce your request rate."),
        S3ErrorResponse(429, "TooManyRequests", "slow down"),
        S3ErrorResponse(500, "InternalError", "oops"),
        S3ErrorResponse(400, "RequestTimeout", "idle socket")}) {
    LoopbackHttpServer server(FailThenSucceed(1, failure));
    absl::Status st = Fetch(server);
    EXPECT_TRUE(st.ok()) << failure.status << ": " << st;
    EXPECT_EQ(server.requests().size(), 2u) << failure.body;
  }
}

TEST_F(S3RetryTest, ConnectionErrorsAreRetried) {
  CannedResponse drop;
  drop.action = CannedResponse::Action::kDropConnection;
  LoopbackHttpServer server(FailThenSucceed(2, drop));
  absl::Status st = Fetch(server);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(got_, "payload");
  EXPECT_EQ(server.requests().size(), 3u);
}

TEST_F(S3RetryTest, AuthenticationErrorsAreNeverRetried) {
  for (const CannedResponse& failure :
       {S3ErrorResponse(403, "SignatureDoesNotMatch",
                        "The request signature we calculated "
                        "does not match the signature you provided."),
        S3ErrorResponse(403, "InvalidAccessKeyId", "unknown key"),
        S3ErrorResponse(403, "AccessDenied", "no"),
        // A 403 stays final even with a code that would otherwise be retried.
        S3ErrorResponse(403, "InternalError", "odd"), S3ErrorResponse(401, "", "")}) {
    LoopbackHttpServer server(FailThenSucceed(1, failure));
    absl::Status st = Fetch(server);
    EXPECT_FALSE(st.ok()) << failure.body;
    EXPECT_EQ(server.requests().size(), 1u) << failure.body;
  }
  EXPECT_TRUE(waits_.waits().empty());
}

TEST_F(S3RetryTest, GivesUpAfterMaxAttempts) {
  LoopbackHttpServer server(FailThenSucceed(100, S3ErrorResponse(503, "SlowDown", "busy")));
  absl::Status st = Fetch(server, 4);
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("HTTP 503 SlowDown: busy"));
  EXPECT_THAT(st.message(), HasSubstr("(after 4 attempts)"));
  EXPECT_EQ(server.requests().size(), 4u);
  EXPECT_EQ(waits_.waits().size(), 3u);
}

TEST_F(S3RetryTest, BackoffDoublesUpToTheCap) {
  LoopbackHttpServer server(FailThenSucceed(100, S3ErrorResponse(500, "InternalError", "")));
  S3Config config = testing::LoopbackConfig(server);
  config.max_attempts = 7;
  config.initial_backoff = absl::Milliseconds(50);
  config.max_backoff = absl::Milliseconds(300);
  auto client = S3Client::Create(config, waits_.Deps());
  ASSERT_TRUE(client.ok());
  EXPECT_FALSE((*client)->DeleteObject("k").ok());
  EXPECT_THAT(waits_.waits(), ElementsAre(absl::Milliseconds(50), absl::Milliseconds(100),
                                          absl::Milliseconds(200), absl::Milliseconds(300),
                                          absl::Milliseconds(300), absl::Milliseconds(300)));
}

TEST_F(S3RetryTest, JitterIsDrawnBelowTheCap) {
  LoopbackHttpServer server(FailThenSucceed(2, S3ErrorResponse(503, "SlowDown", "")));
  S3Config config = testing::LoopbackConfig(server);
  S3ClientDeps deps = waits_.Deps();
  std::vector<absl::Duration> bounds;
  deps.jitter = [&](absl::Duration bound) {
    bounds.push_back(bound);
    return bound / 3;
  };
  auto client = S3Client::Create(config, deps);
  ASSERT_TRUE(client.ok());
  EXPECT_TRUE((*client)->DeleteObject("k").ok());
  EXPECT_THAT(bounds, ElementsAre(absl::Milliseconds(100), absl::Milliseconds(200)));
  EXPECT_THAT(waits_.waits(),
              ElementsAre(absl::Milliseconds(100) / 3, absl::Milliseconds(200) / 3));
}

TEST_F(S3RetryTest, UploadsAreResentWholeOnRetry) {
  CannedResponse unavailable;
  unavailable.status = 503;
  LoopbackHttpServer server(FailThenSucceed(1, unavailable));
  auto client = S3Client::Create(testing::LoopbackConfig(server), waits_.Deps());
  ASSERT_TRUE(client.ok());
  const std::string data(100000, 'q');
  ASSERT_TRUE((*client)->PutObject("k", data).ok());
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].body, data);
  EXPECT_EQ(reqs[1].body, data);
}

}  // namespace
}  // namespace gpuctl::s3
