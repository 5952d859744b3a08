#ifndef GPUCTL_DAEMON_RUNTIME_METRICS_WIRING_H_
#define GPUCTL_DAEMON_RUNTIME_METRICS_WIRING_H_

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/common/clock.h"
#include "daemon/common/task_runner.h"
#include "daemon/core/daemon_core.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/metrics/metrics_server.h"
#include "daemon/s3/s3_trace_store.h"
#include "daemon/s3/trace_uploader.h"
#include "daemon/store/local_store.h"
#include "grpcpp/grpcpp.h"

namespace gpuctl::daemon {

// The counters of a daemon with metrics.listen set; null without (then
// nothing is counted and no component is told of metrics at all).
std::unique_ptr<metrics::DaemonMetrics> MakeDaemonMetrics(const metrics::MetricsOptions& options);

// Counts every gRPC call the server answers into `metrics`.
void AddCallCounter(grpc::ServerBuilder& builder, metrics::DaemonMetrics* metrics);

// Counts the uploader's attempts into `metrics`.
void CountUploads(s3::TraceUploaderDeps& deps, metrics::DaemonMetrics* metrics);

// What the metrics listener reads besides `metrics`' own registry.
struct MetricsSources {
  TaskRunner* loop;
  DaemonCore* core;  // read on `loop`
  const LocalTraceStore* local_store;
  const s3::S3TraceStore* s3_store;  // null without a bucket
  Clock* clock;
};

// Serves /metrics on options.listen: the registry, the core's and the
// store's state, the process's CPU and memory.
absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> StartMetricsServer(
    const metrics::MetricsOptions& options, metrics::DaemonMetrics& metrics,
    const MetricsSources& sources);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_RUNTIME_METRICS_WIRING_H_
