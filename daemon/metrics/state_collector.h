#ifndef GPUCTL_DAEMON_METRICS_STATE_COLLECTOR_H_
#define GPUCTL_DAEMON_METRICS_STATE_COLLECTOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "daemon/common/mutex.h"
#include "daemon/common/task_runner.h"
#include "daemon/core/core_metrics.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace gpuctl::daemon::metrics {

// The trace store's state, read at scrape time (thread-safe readers).
struct StorageState {
  uint64_t traces = 0;
  uint64_t bytes = 0;
  uint64_t retention_deletions = 0;
  // With an S3 backend.
  struct Uploads {
    uint64_t pending = 0;
    // How long the oldest trace still to upload has waited; zero when none.
    absl::Duration oldest_pending_age{};
    uint64_t uploaded_bytes = 0;
  };
  std::optional<Uploads> s3{};
};

// Gauges of what is true at scrape time: the core's snapshot (attached
// processes by role and kind, traces and captures in flight, ingest) and
// the store's. The core lives on its event loop, so the snapshot is a task
// posted there; the scrape waits for it at most `deadline` and otherwise
// serves the last snapshot it got (and counts the miss), so a busy loop
// slows no scrape and a scrape never holds the loop.
class StateCollector final : public prometheus::Collectable {
 public:
  struct Deps {
    TaskRunner* loop;
    // Runs on the loop.
    std::function<CoreSnapshot()> core{};
    // Runs on the scraping thread; may be empty.
    std::function<StorageState()> storage{};
    absl::Duration deadline = absl::Seconds(1);
  };
  explicit StateCollector(Deps deps);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::optional<CoreSnapshot> ReadCore() const;

  TaskRunner* const loop_;
  const std::shared_ptr<const std::function<CoreSnapshot()>> core_;
  const std::function<StorageState()> storage_;
  const absl::Duration deadline_;
  mutable Mutex mu_;
  mutable std::optional<CoreSnapshot> last_ ABSL_GUARDED_BY(mu_);
  mutable uint64_t missed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpuctl::daemon::metrics

#endif  // GPUCTL_DAEMON_METRICS_STATE_COLLECTOR_H_
