#include "daemon/metrics/daemon_metrics.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"

namespace gpuctl::daemon::metrics {
namespace {

using prometheus::Histogram;

constexpr absl::string_view kTriggers[] = {"on_demand", "scheduled"};
constexpr absl::string_view kOutcomes[] = {"completed", "cancelled", "failed", "refused"};
constexpr absl::string_view kRefusalReasons[] = {"permission_denied", "protocol_version",
                                                 "invalid_hello", "rate_limited", "other"};

absl::string_view TriggerLabel(TraceTrigger trigger) {
  return trigger == TraceTrigger::kScheduled ? kTriggers[1] : kTriggers[0];
}

absl::string_view OutcomeLabel(TraceOutcome outcome) {
  switch (outcome) {
    case TraceOutcome::kCompleted:
      return kOutcomes[0];
    case TraceOutcome::kCancelled:
      return kOutcomes[1];
    case TraceOutcome::kFailed:
      return kOutcomes[2];
    case TraceOutcome::kRefused:
      break;
  }
  return kOutcomes[3];
}

// "CAPTURE_STATUS_TIMED_OUT" -> "timed_out".
std::string CaptureStatusLabel(v1::CaptureStatus status) {
  std::string name = v1::CaptureStatus_Name(status);
  if (name.empty()) name = "CAPTURE_STATUS_UNSPECIFIED";
  return absl::AsciiStrToLower(absl::StripPrefix(name, "CAPTURE_STATUS_"));
}

Histogram::BucketBoundaries Seconds(std::initializer_list<double> bounds) { return bounds; }

prometheus::Family<prometheus::Counter>& Counters(prometheus::Registry& registry,
                                                  const std::string& name,
                                                  const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

Histogram* AddHistogram(prometheus::Registry& registry, const std::string& name,
                        const std::string& help, const Histogram::BucketBoundaries& bounds) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add({}, bounds);
}

}  // namespace

std::string StatusCodeLabel(absl::StatusCode code) {
  std::string name = absl::StatusCodeToString(code);
  absl::AsciiStrToUpper(&name);
  return name;
}

absl::string_view RefusalReasonLabel(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kPermissionDenied:
      return kRefusalReasons[0];
    case absl::StatusCode::kFailedPrecondition:
      return kRefusalReasons[1];
    case absl::StatusCode::kInvalidArgument:
      return kRefusalReasons[2];
    case absl::StatusCode::kResourceExhausted:
      return kRefusalReasons[3];
    default:
      return kRefusalReasons[4];
  }
}

DaemonMetrics::DaemonMetrics(absl::string_view version, std::vector<std::string> grpc_methods)
    : grpc_methods_(grpc_methods.begin(), grpc_methods.end()) {
  prometheus::BuildGauge()
      .Name("gpuctld_build_info")
      .Help("Always 1; the daemon's version as a label")
      .Register(*registry_)
      .Add({{"version", std::string(version)}})
      .Set(1);
  RegisterCounters();
  RegisterHistograms();
}

void DaemonMetrics::RegisterCounters() {
  prometheus::Registry& r = *registry_;
  registrations_ =
      &Counters(r, "gpuctld_registrations_total", "Processes whose Hello was accepted").Add({});
  refusals_ = &Counters(r, "gpuctld_registration_refusals_total", "Hellos refused, by reason");
  traces_started_ = &Counters(r, "gpuctld_traces_started_total", "Traces started, by trigger");
  traces_ = &Counters(r, "gpuctld_traces_total",
                      "Traces ended (or refused at the start), by trigger and outcome");
  results_ = &Counters(r, "gpuctld_process_results_total",
                       "Final per-process results of traces, by status");
  rpcs_ = &Counters(r, "grpc_server_handled_total",
                    "gRPC calls completed on the server, by service, method and code");
  schedule_decisions_ =
      &Counters(r, "gpuctld_schedule_decisions_total",
                "Decisions of the schedule for a job, by rule and outcome (capture, not_sampled, "
                "a skip's reason)");
  upload_attempts_ = &Counters(r, "gpuctld_s3_upload_attempts_total",
                               "Attempts to upload a trace to S3, by result");
  // The fixed series exist from the start, at 0, so rates and increases
  // see their first event.
  for (absl::string_view reason : kRefusalReasons) {
    refusals_->Add({{"reason", std::string(reason)}});
  }
  for (absl::string_view trigger : kTriggers) {
    traces_started_->Add({{"trigger", std::string(trigger)}});
    for (absl::string_view outcome : kOutcomes) {
      traces_->Add({{"trigger", std::string(trigger)}, {"outcome", std::string(outcome)}});
    }
  }
  for (int s = v1::CaptureStatus_MIN + 1; s <= v1::CaptureStatus_MAX; ++s) {
    if (v1::CaptureStatus_IsValid(s)) {
      results_->Add({{"status", CaptureStatusLabel(static_cast<v1::CaptureStatus>(s))}});
    }
  }
}

void DaemonMetrics::RegisterHistograms() {
  prometheus::Registry& r = *registry_;
  trigger_latency_ = AddHistogram(
      r, "gpuctld_trigger_latency_seconds",
      "From a trace request's arrival to each process's window opening (includes the start "
      "delay)",
      Seconds({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}));
  start_skew_ = AddHistogram(
      r, "gpuctld_start_skew_seconds",
      "How late each process's time window opened after the start instant",
      Seconds({0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}));
  payload_bytes_ = AddHistogram(
      r, "gpuctld_payload_bytes", "Trace data received from each process (binary records)",
      {4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30});
  conversion_ = AddHistogram(
      r, "gpuctld_conversion_seconds",
      "From a payload's admission to its stored file: validation, conversion, gzip, write",
      Seconds({0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}));
}

void DaemonMetrics::OnHelloAccepted() { registrations_->Increment(); }

void DaemonMetrics::OnHelloRefused(const absl::Status& status) {
  refusals_->Add({{"reason", std::string(RefusalReasonLabel(status.code()))}}).Increment();
}

void DaemonMetrics::OnTraceStarted(TraceTrigger trigger) {
  traces_started_->Add({{"trigger", std::string(TriggerLabel(trigger))}}).Increment();
}

void DaemonMetrics::OnTraceDone(TraceTrigger trigger, TraceOutcome outcome) {
  traces_
      ->Add({{"trigger", std::string(TriggerLabel(trigger))},
             {"outcome", std::string(OutcomeLabel(outcome))}})
      .Increment();
}

void DaemonMetrics::OnWindowOpened(absl::Duration trigger_latency,
                                   std::optional<absl::Duration> start_skew) {
  trigger_latency_->Observe(absl::ToDoubleSeconds(trigger_latency));
  if (start_skew.has_value()) start_skew_->Observe(absl::ToDoubleSeconds(*start_skew));
}

void DaemonMetrics::OnProcessResult(const v1::ProcessResult& result,
                                    std::optional<absl::Duration> conversion) {
  results_->Add({{"status", CaptureStatusLabel(result.status())}}).Increment();
  if (result.payload_bytes() > 0)
    payload_bytes_->Observe(static_cast<double>(result.payload_bytes()));
  if (conversion.has_value()) conversion_->Observe(absl::ToDoubleSeconds(*conversion));
}

prometheus::Counter& DaemonMetrics::RpcCounter(absl::string_view service, absl::string_view method,
                                               absl::StatusCode code) {
  return rpcs_->Add({{"grpc_service", std::string(service)},
                     {"grpc_method", std::string(method)},
                     {"grpc_code", StatusCodeLabel(code)}});
}

void DaemonMetrics::OnRpcDone(absl::string_view full_method, absl::StatusCode code) {
  // "/package.Service/Method". A method the server does not serve is one
  // "unknown" series, so a scanner cannot grow the label set.
  absl::string_view service = "unknown";
  absl::string_view method = "unknown";
  if (grpc_methods_.contains(full_method)) {
    absl::string_view path = full_method.substr(1);
    const size_t slash = path.find('/');
    service = path.substr(0, slash);
    method = path.substr(slash + 1);
  }
  RpcCounter(service, method, code).Increment();
}

void DaemonMetrics::OnScheduleDecision(absl::string_view rule, absl::string_view outcome) {
  schedule_decisions_->Add({{"rule", std::string(rule)}, {"outcome", std::string(outcome)}})
      .Increment();
}

void DaemonMetrics::OnUploadAttempt(const absl::Status& status) {
  upload_attempts_->Add({{"result", status.ok() ? "ok" : StatusCodeLabel(status.code())}})
      .Increment();
}

}  // namespace gpuctl::daemon::metrics
