#ifndef GPUCTL_DAEMON_METRICS_DAEMON_METRICS_H_
#define GPUCTL_DAEMON_METRICS_DAEMON_METRICS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/core/core_metrics.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace gpuctl::daemon::metrics {

// The counters and histograms that gpuctld's components update as things
// happen (docs/metrics.md lists them), in one prometheus::Registry that
// the metrics server exposes next to the gauges read at scrape time
// (StateCollector, ProcessCollector).
//
// Every label value comes from a fixed set (an enum's names, a status
// code, the gRPC methods registered), never from a pid, a job or a trace
// id. Thread-safe: the core calls it on the event loop, the gRPC
// interceptor on gRPC's threads, the S3 uploader on its own.
class DaemonMetrics final : public CoreMetrics {
 public:
  // `version`: gpuctld_build_info's label. `grpc_methods`: the methods
  // the gRPC server serves, as "/package.Service/Method" (each must have
  // both parts); calls to any other are counted under "unknown".
  DaemonMetrics(absl::string_view version, std::vector<std::string> grpc_methods);

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  // CoreMetrics.
  void OnHelloAccepted() override;
  void OnHelloRefused(const absl::Status& status) override;
  void OnTraceStarted(TraceTrigger trigger) override;
  void OnTraceDone(TraceTrigger trigger, TraceOutcome outcome) override;
  void OnWindowOpened(absl::Duration trigger_latency,
                      std::optional<absl::Duration> start_skew) override;
  void OnProcessResult(const v1::ProcessResult& result,
                       std::optional<absl::Duration> conversion) override;

  // A gRPC call ended. `full_method`: "/gpuctl.v1.Gpuctl/Trace".
  void OnRpcDone(absl::string_view full_method, absl::StatusCode code);
  // One attempt to upload a trace to S3 ended.
  void OnUploadAttempt(const absl::Status& status);
  // The schedule decided a job's slot, step block or anomaly: `rule` is a
  // configured rule's name, `outcome` a scheduler::SlotOutcomeLabel.
  void OnScheduleDecision(absl::string_view rule, absl::string_view outcome);

 private:
  void RegisterCounters();
  void RegisterHistograms();
  prometheus::Counter& RpcCounter(absl::string_view service, absl::string_view method,
                                  absl::StatusCode code);

  const std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  const absl::flat_hash_set<std::string> grpc_methods_;
  prometheus::Counter* registrations_;
  prometheus::Family<prometheus::Counter>* refusals_;
  prometheus::Family<prometheus::Counter>* traces_started_;
  prometheus::Family<prometheus::Counter>* traces_;
  prometheus::Family<prometheus::Counter>* results_;
  prometheus::Histogram* trigger_latency_;
  prometheus::Histogram* start_skew_;
  prometheus::Histogram* payload_bytes_;
  prometheus::Histogram* conversion_;
  prometheus::Family<prometheus::Counter>* rpcs_;
  prometheus::Family<prometheus::Counter>* upload_attempts_;
  prometheus::Family<prometheus::Counter>* schedule_decisions_;
};

// The label value of a status code: "OK", "NOT_FOUND"... as gRPC spells
// them.
std::string StatusCodeLabel(absl::StatusCode code);
// The `reason` label of a refused Hello: "permission_denied",
// "protocol_version", "invalid_hello", "rate_limited" or "other", as the
// IPC server tells the process (HelloRejected.reason).
absl::string_view RefusalReasonLabel(absl::StatusCode code);

}  // namespace gpuctl::daemon::metrics

#endif  // GPUCTL_DAEMON_METRICS_DAEMON_METRICS_H_
