#include "daemon/runtime/metrics_wiring.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "daemon/metrics/process_collector.h"
#include "daemon/metrics/state_collector.h"
#include "daemon/rpc/call_counter.h"
#include "daemon/rpc/reflection_v1_service.h"

#ifndef GPUCTL_VERSION
#define GPUCTL_VERSION "0.0.0-dev"
#endif

namespace gpuctl::daemon {

std::unique_ptr<metrics::DaemonMetrics> MakeDaemonMetrics(const metrics::MetricsOptions& options) {
  if (options.listen.empty()) return nullptr;
  std::vector<std::string> methods = ServedMethods(
      {"gpuctl.v1.Gpuctl", kReflectionV1ServiceName, "grpc.reflection.v1alpha.ServerReflection"});
  // gRPC's own health service is not in the generated descriptor pool.
  methods.push_back("/grpc.health.v1.Health/Check");
  methods.push_back("/grpc.health.v1.Health/Watch");
  return std::make_unique<metrics::DaemonMetrics>(GPUCTL_VERSION, std::move(methods));
}

void AddCallCounter(grpc::ServerBuilder& builder, metrics::DaemonMetrics* metrics) {
  if (metrics == nullptr) return;
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(MakeCallCounter([metrics](absl::string_view method, absl::StatusCode code) {
    metrics->OnRpcDone(method, code);
  }));
  builder.experimental().SetInterceptorCreators(std::move(creators));
}

void CountUploads(s3::TraceUploaderDeps& deps, metrics::DaemonMetrics* metrics) {
  if (metrics == nullptr) return;
  deps.on_attempt = [metrics, previous = std::move(deps.on_attempt)](absl::string_view trace_id,
                                                                     const absl::Status& status) {
    metrics->OnUploadAttempt(status);
    if (previous) previous(trace_id, status);
  };
}

absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> StartMetricsServer(
    const metrics::MetricsOptions& options, metrics::DaemonMetrics& metrics,
    const MetricsSources& sources) {
  auto storage = [sources]() {
    const StoreTotals totals = sources.local_store->Totals();
    metrics::StorageState state{.traces = totals.complete,
                                .bytes = totals.bytes,
                                .retention_deletions = sources.local_store->retention_deletions()};
    if (sources.s3_store != nullptr) {
      const absl::Time since = sources.s3_store->oldest_pending_upload_since();
      state.s3 = metrics::StorageState::Uploads{
          .pending = sources.s3_store->pending_uploads(),
          .oldest_pending_age = since == absl::InfiniteFuture()
                                    ? absl::ZeroDuration()
                                    : std::max(absl::ZeroDuration(), sources.clock->Now() - since),
          .uploaded_bytes = sources.s3_store->uploaded_bytes()};
    }
    return state;
  };
  auto state = std::make_shared<metrics::StateCollector>(
      metrics::StateCollector::Deps{.loop = sources.loop,
                                    .core = [core = sources.core] { return core->Snapshot(); },
                                    .storage = std::move(storage)});
  return metrics::MetricsServer::Start(options, {metrics.registry(), std::move(state),
                                                 std::make_shared<metrics::ProcessCollector>()});
}

}  // namespace gpuctl::daemon
