#ifndef GPUCTL_DAEMON_METRICS_PROCESS_COLLECTOR_H_
#define GPUCTL_DAEMON_METRICS_PROCESS_COLLECTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace gpuctl::daemon::metrics {

// What /proc says of one process.
struct ProcessStats {
  double cpu_seconds = 0;         // user + system
  double start_time_seconds = 0;  // since the Unix epoch
  double resident_bytes = 0;
  double virtual_bytes = 0;
  double threads = 0;
  double open_fds = 0;
};

// Reads `<proc_root>/self/stat`, `self/status`, `self/fd` and
// `<proc_root>/stat` (boot time). `ticks_per_second`: sysconf(_SC_CLK_TCK).
absl::StatusOr<ProcessStats> ReadProcessStats(const std::string& proc_root,
                                              int64_t ticks_per_second);

// The daemon's own CPU and memory under the names Prometheus's client
// libraries use (process_cpu_seconds_total, process_resident_memory_bytes,
// ...), read from /proc at each scrape (prometheus-cpp has no process
// collector). A /proc that cannot be read yields no samples, not an error
// page.
class ProcessCollector final : public prometheus::Collectable {
 public:
  explicit ProcessCollector(std::string proc_root = "/proc");
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::string proc_root_;
  const int64_t ticks_per_second_;
};

}  // namespace gpuctl::daemon::metrics

#endif  // GPUCTL_DAEMON_METRICS_PROCESS_COLLECTOR_H_
