// The metrics section: gpuctld's Prometheus listener (daemon/metrics).
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/config/config_schema.h"
#include "daemon/config/config_values.h"
#include "daemon/metrics/metrics_options.h"

namespace gpuctl::daemon {
namespace {

// The address's shape here, at its line; the loopback rule once the flags
// are merged (ValidateMerged), since --metrics-allow-insecure may lift it.
absl::Status ReadMetricsListen(const ConfigValue& v, DaemonOptions* o) {
  absl::StatusOr<std::string> text = v.String();
  if (!text.ok()) return text.status();
  if (absl::StatusOr<metrics::MetricsHostPort> parts = metrics::SplitMetricsListen(*text);
      !parts.ok()) {
    return v.Error(absl::StrCat(QuoteConfigText(*text), ": ", parts.status().message()));
  }
  o->metrics.listen = *std::move(text);
  return absl::OkStatus();
}

constexpr ConfigKey kMetricsKeys[] = {
    {.name = "listen", .read = ReadMetricsListen},
    {.name = "allow_insecure",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return StoreTo(v.Bool(), &o->metrics.allow_insecure); }},
};

}  // namespace

absl::Span<const ConfigKey> MetricsConfigKeys() { return kMetricsKeys; }

}  // namespace gpuctl::daemon
