#ifndef GPUCTL_DAEMON_METRICS_FAMILIES_H_
#define GPUCTL_DAEMON_METRICS_FAMILIES_H_

#include <string>
#include <utility>
#include <vector>

#include "prometheus/metric_family.h"

namespace gpuctl::daemon::metrics {

// One sample of a family that a collector builds at scrape time.
inline prometheus::ClientMetric Sample(double value,
                                       std::vector<prometheus::ClientMetric::Label> labels = {}) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  metric.counter.value = value;
  return metric;
}

inline prometheus::MetricFamily Family(std::string name, std::string help,
                                       prometheus::MetricType type,
                                       std::vector<prometheus::ClientMetric> samples) {
  return prometheus::MetricFamily{std::move(name), std::move(help), type, std::move(samples)};
}

inline prometheus::MetricFamily GaugeFamily(std::string name, std::string help, double value) {
  return Family(std::move(name), std::move(help), prometheus::MetricType::Gauge, {Sample(value)});
}

inline prometheus::MetricFamily CounterFamily(std::string name, std::string help, double value) {
  return Family(std::move(name), std::move(help), prometheus::MetricType::Counter, {Sample(value)});
}

}  // namespace gpuctl::daemon::metrics

#endif  // GPUCTL_DAEMON_METRICS_FAMILIES_H_
