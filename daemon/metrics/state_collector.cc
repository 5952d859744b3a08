#include "daemon/metrics/state_collector.h"

#include <chrono>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "daemon/metrics/families.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon::metrics {
namespace {

using prometheus::MetricFamily;
using prometheus::MetricType;

// What a posted snapshot task and the scrape waiting for it share; the
// task may run after the scrape gave up.
struct PendingSnapshot {
  Mutex mu;
  CondVar cv;
  std::optional<CoreSnapshot> snapshot ABSL_GUARDED_BY(mu);
};

// PROCESS_ROLE_WORKER -> "worker".
std::string RoleLabel(v1::ProcessRole role) {
  return absl::AsciiStrToLower(absl::StripPrefix(v1::ProcessRole_Name(role), "PROCESS_ROLE_"));
}

void AppendCore(const CoreSnapshot& core, std::vector<MetricFamily>& out) {
  std::vector<prometheus::ClientMetric> attached;
  for (const CoreSnapshot::AttachedGroup& group : core.attached) {
    attached.push_back(Sample(static_cast<double>(group.count),
                              {{"kind", group.kind}, {"role", RoleLabel(group.role)}}));
  }
  out.push_back(Family("gpuctld_attached_processes", "Processes attached now, by role and kind",
                       MetricType::Gauge, std::move(attached)));
  out.push_back(GaugeFamily("gpuctld_active_traces", "Traces in progress",
                            static_cast<double>(core.active_traces)));
  out.push_back(GaugeFamily("gpuctld_captures_in_flight",
                            "Processes asked to capture whose result has not arrived yet",
                            static_cast<double>(core.captures_in_flight)));
  out.push_back(
      Family("gpuctld_ingest_bytes",
             "Trace data held for validation and conversion: converting now, or waiting for room "
             "under trace.max_ingest_bytes",
             MetricType::Gauge,
             {Sample(static_cast<double>(core.ingest_running_bytes), {{"state", "converting"}}),
              Sample(static_cast<double>(core.ingest_waiting_bytes), {{"state", "waiting"}})}));
  out.push_back(GaugeFamily("gpuctld_ingest_waiting_results",
                            "Process results waiting for room under trace.max_ingest_bytes",
                            static_cast<double>(core.ingest_waiting_results)));
  out.push_back(GaugeFamily("gpuctld_ingest_max_bytes", "trace.max_ingest_bytes (0: no cap)",
                            static_cast<double>(core.ingest_max_bytes)));
}

void AppendStorage(const StorageState& storage, std::vector<MetricFamily>& out) {
  out.push_back(GaugeFamily("gpuctld_store_traces", "Traces in the local store",
                            static_cast<double>(storage.traces)));
  out.push_back(GaugeFamily("gpuctld_store_bytes", "Bytes of trace files in the local store",
                            static_cast<double>(storage.bytes)));
  out.push_back(CounterFamily("gpuctld_store_retention_deletions_total",
                              "Traces deleted by the store's retention policy",
                              static_cast<double>(storage.retention_deletions)));
  if (!storage.s3.has_value()) return;
  out.push_back(GaugeFamily("gpuctld_s3_uploads_pending", "Traces waiting to be uploaded to S3",
                            static_cast<double>(storage.s3->pending)));
  out.push_back(GaugeFamily("gpuctld_s3_oldest_pending_upload_age_seconds",
                            "How long the oldest trace waiting for upload has waited (0: none)",
                            absl::ToDoubleSeconds(storage.s3->oldest_pending_age)));
  out.push_back(CounterFamily("gpuctld_s3_uploaded_bytes_total",
                              "Bytes of trace files uploaded to S3",
                              static_cast<double>(storage.s3->uploaded_bytes)));
}

}  // namespace

StateCollector::StateCollector(Deps deps)
    : loop_(deps.loop),
      core_(std::make_shared<const std::function<CoreSnapshot()>>(std::move(deps.core))),
      storage_(std::move(deps.storage)),
      deadline_(deps.deadline) {}

std::optional<CoreSnapshot> StateCollector::ReadCore() const {
  auto pending = std::make_shared<PendingSnapshot>();
  loop_->Post([pending, core = core_] {
    CoreSnapshot snapshot = (*core)();
    MutexLock lock(&pending->mu);
    pending->snapshot = std::move(snapshot);
    pending->cv.SignalAll();
  });
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(deadline_);
  MutexLock lock(&pending->mu);
  while (!pending->snapshot.has_value()) {
    if (!pending->cv.WaitUntil(&pending->mu, deadline)) break;
  }
  return std::move(pending->snapshot);
}

std::vector<prometheus::MetricFamily> StateCollector::Collect() const {
  std::optional<CoreSnapshot> core = ReadCore();
  std::vector<MetricFamily> out;
  {
    MutexLock lock(&mu_);
    if (core.has_value()) {
      last_ = std::move(core);
    } else {
      ++missed_;
    }
    if (last_.has_value()) AppendCore(*last_, out);
    out.push_back(CounterFamily(
        "gpuctld_metrics_stale_scrapes_total",
        "Scrapes that served the previous snapshot of the daemon's state because its event "
        "loop did not answer in time",
        static_cast<double>(missed_)));
  }
  if (storage_) AppendStorage(storage_(), out);
  return out;
}

}  // namespace gpuctl::daemon::metrics
