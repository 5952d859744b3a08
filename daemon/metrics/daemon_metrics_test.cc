#include "daemon/metrics/daemon_metrics.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace gpuctl::daemon::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Text(const DaemonMetrics& metrics) {
  return prometheus::TextSerializer().Serialize(metrics.registry()->Collect());
}

DaemonMetrics MakeMetrics() {
  return DaemonMetrics("1.2.3", {"/gpuctl.v1.Gpuctl/Trace", "/grpc.health.v1.Health/Check"});
}

TEST(DaemonMetricsTest, EveryFixedSeriesExistsAtZeroBeforeAnythingHappens) {
  DaemonMetrics metrics = MakeMetrics();
  const std::string text = Text(metrics);
  EXPECT_THAT(text, HasSubstr("gpuctld_build_info{version=\"1.2.3\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpuctld_registrations_total 0"));
  EXPECT_THAT(text, HasSubstr("gpuctld_registration_refusals_total{reason=\"rate_limited\"} 0"));
  EXPECT_THAT(text,
              HasSubstr("gpuctld_traces_total{outcome=\"completed\",trigger=\"scheduled\"} 0"));
  EXPECT_THAT(text, HasSubstr("gpuctld_process_results_total{status=\"timed_out\"} 0"));
  EXPECT_THAT(text, HasSubstr("gpuctld_trigger_latency_seconds_count 0"));
}

TEST(DaemonMetricsTest, CountsRegistrationsRefusalsByReasonAndTraces) {
  DaemonMetrics metrics = MakeMetrics();
  metrics.OnHelloAccepted();
  metrics.OnHelloAccepted();
  metrics.OnHelloRefused(absl::PermissionDeniedError("uid 1001 is not allowed"));
  metrics.OnHelloRefused(absl::ResourceExhaustedError("too many Hellos"));
  metrics.OnHelloRefused(absl::InternalError("odd"));
  metrics.OnTraceStarted(TraceTrigger::kOnDemand);
  metrics.OnTraceDone(TraceTrigger::kOnDemand, TraceOutcome::kCompleted);
  metrics.OnTraceDone(TraceTrigger::kOnDemand, TraceOutcome::kRefused);
  const std::string text = Text(metrics);
  EXPECT_THAT(text, HasSubstr("gpuctld_registrations_total 2"));
  EXPECT_THAT(text,
              HasSubstr("gpuctld_registration_refusals_total{reason=\"permission_denied\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpuctld_registration_refusals_total{reason=\"rate_limited\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpuctld_registration_refusals_total{reason=\"other\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpuctld_traces_started_total{trigger=\"on_demand\"} 1"));
  EXPECT_THAT(text,
              HasSubstr("gpuctld_traces_total{outcome=\"completed\",trigger=\"on_demand\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpuctld_traces_total{outcome=\"refused\",trigger=\"on_demand\"} 1"));
}

TEST(DaemonMetricsTest, ResultsFeedTheirHistogramsInBaseUnits) {
  DaemonMetrics metrics = MakeMetrics();
  v1::ProcessResult ok;
  ok.set_status(v1::CAPTURE_STATUS_OK);
  ok.set_payload_bytes(10000);
  metrics.OnProcessResult(ok, absl::Milliseconds(30));
  v1::ProcessResult lost;
  lost.set_status(v1::CAPTURE_STATUS_LOST);
  metrics.OnProcessResult(lost, std::nullopt);
  metrics.OnWindowOpened(absl::Milliseconds(120), absl::Microseconds(300));
  metrics.OnWindowOpened(absl::Milliseconds(2), std::nullopt);
  const std::string text = Text(metrics);
  EXPECT_THAT(text, HasSubstr("gpuctld_process_results_total{status=\"ok\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpuctld_process_results_total{status=\"lost\"} 1"));
  // A lost process delivered nothing: neither payload nor conversion.
  EXPECT_THAT(text, HasSubstr("gpuctld_payload_bytes_count 1"));
  EXPECT_THAT(text, HasSubstr("gpuctld_payload_bytes_sum 10000"));
  EXPECT_THAT(text, HasSubstr("gpuctld_payload_bytes_bucket{le=\"16384\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpuctld_payload_bytes_bucket{le=\"4096\"} 0"));
  EXPECT_THAT(text, HasSubstr("gpuctld_conversion_seconds_count 1"));
  EXPECT_THAT(text, HasSubstr("gpuctld_conversion_seconds_sum 0.03"));
  EXPECT_THAT(text, HasSubstr("gpuctld_trigger_latency_seconds_count 2"));
  EXPECT_THAT(text, HasSubstr("gpuctld_trigger_latency_seconds_sum 0.122"));
  // An iteration window has no start instant, so no skew.
  EXPECT_THAT(text, HasSubstr("gpuctld_start_skew_seconds_count 1"));
  EXPECT_THAT(text, HasSubstr("gpuctld_start_skew_seconds_bucket{le=\"0.0005\"} 1"));
}

TEST(DaemonMetricsTest, RpcMethodsOutsideTheServedSetShareOneSeries) {
  DaemonMetrics metrics = MakeMetrics();
  metrics.OnRpcDone("/gpuctl.v1.Gpuctl/Trace", absl::StatusCode::kNotFound);
  metrics.OnRpcDone("/gpuctl.v1.Gpuctl/Trace", absl::StatusCode::kOk);
  metrics.OnRpcDone("/gpuctl.v1.Gpuctl/NoSuchMethod", absl::StatusCode::kUnimplemented);
  metrics.OnRpcDone("/scanner.Probe/x1", absl::StatusCode::kUnimplemented);
  metrics.OnRpcDone("garbage", absl::StatusCode::kUnimplemented);
  const std::string text = Text(metrics);
  EXPECT_THAT(text, HasSubstr("grpc_server_handled_total{grpc_code=\"NOT_FOUND\",grpc_method="
                              "\"Trace\",grpc_service=\"gpuctl.v1.Gpuctl\"} 1"));
  EXPECT_THAT(text, HasSubstr("grpc_server_handled_total{grpc_code=\"OK\",grpc_method=\"Trace\","
                              "grpc_service=\"gpuctl.v1.Gpuctl\"} 1"));
  EXPECT_THAT(text, HasSubstr("grpc_server_handled_total{grpc_code=\"UNIMPLEMENTED\",grpc_method="
                              "\"unknown\",grpc_service=\"unknown\"} 3"));
  EXPECT_THAT(text, Not(HasSubstr("NoSuchMethod")));
  EXPECT_THAT(text, Not(HasSubstr("scanner")));
}

TEST(DaemonMetricsTest, UploadAttemptsByResult) {
  DaemonMetrics metrics = MakeMetrics();
  metrics.OnUploadAttempt(absl::UnavailableError("connection refused"));
  metrics.OnUploadAttempt(absl::UnavailableError("connection refused"));
  metrics.OnUploadAttempt(absl::OkStatus());
  const std::string text = Text(metrics);
  EXPECT_THAT(text, HasSubstr("gpuctld_s3_upload_attempts_total{result=\"UNAVAILABLE\"} 2"));
  EXPECT_THAT(text, HasSubstr("gpuctld_s3_upload_attempts_total{result=\"ok\"} 1"));
}

TEST(DaemonMetricsTest, ScheduleDecisionsByRuleAndOutcome) {
  DaemonMetrics metrics = MakeMetrics();
  metrics.OnScheduleDecision("hourly", "capture");
  metrics.OnScheduleDecision("hourly", "not_sampled");
  metrics.OnScheduleDecision("hourly", "not_sampled");
  metrics.OnScheduleDecision("stalls", "cool_down");
  const std::string text = Text(metrics);
  EXPECT_THAT(text,
              HasSubstr(R"(gpuctld_schedule_decisions_total{outcome="capture",rule="hourly"} 1)"));
  EXPECT_THAT(
      text,
      HasSubstr(R"(gpuctld_schedule_decisions_total{outcome="not_sampled",rule="hourly"} 2)"));
  EXPECT_THAT(
      text, HasSubstr(R"(gpuctld_schedule_decisions_total{outcome="cool_down",rule="stalls"} 1)"));
}

TEST(DaemonMetricsTest, LabelsFollowTheIpcRefusalReasonsAndGrpcCodeNames) {
  EXPECT_EQ(RefusalReasonLabel(absl::StatusCode::kFailedPrecondition), "protocol_version");
  EXPECT_EQ(RefusalReasonLabel(absl::StatusCode::kInvalidArgument), "invalid_hello");
  EXPECT_EQ(StatusCodeLabel(absl::StatusCode::kDeadlineExceeded), "DEADLINE_EXCEEDED");
  EXPECT_EQ(StatusCodeLabel(absl::StatusCode::kOk), "OK");
}

}  // namespace
}  // namespace gpuctl::daemon::metrics
