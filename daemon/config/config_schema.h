#ifndef GPUCTL_DAEMON_CONFIG_CONFIG_SCHEMA_H_
#define GPUCTL_DAEMON_CONFIG_CONFIG_SCHEMA_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "daemon/config/config_value.h"
#include "daemon/config/daemon_options.h"

namespace gpuctl::daemon {

class ConfigLocations;

// One key of the configuration file: a leaf that reads its value into the
// options, or a section holding more keys.
struct ConfigKey {
  absl::string_view name;
  // A leaf: parses and stores the value.
  absl::Status (*read)(const ConfigValue& value, DaemonOptions* options) = nullptr;
  // Never quoted in messages.
  bool secret = false;
  // A section: its keys.
  absl::Span<const ConfigKey> (*keys)() = nullptr;
  // A section: runs when the file has the section, before its keys.
  void (*open)(DaemonOptions* options) = nullptr;
  // A section: checks across its keys once they are all read.
  absl::Status (*check)(const ConfigLocations& where, DaemonOptions* options) = nullptr;
};

// Stores an outcome read from a ConfigValue.
template <typename T, typename U>
absl::Status StoreTo(absl::StatusOr<T> value, U* out) {
  if (!value.ok()) return value.status();
  *out = *std::move(value);
  return absl::OkStatus();
}

// Reads `value`, a mapping inside a leaf's value (an entry of a list of
// sections, like schedule.rules), with `keys` exactly as a section of the
// file is read: unknown and repeated keys refused, each key named
// "<value.key()>.<name>" in messages. Its lines are not recorded in the
// file's ConfigLocations.
absl::Status ReadConfigMapping(const ConfigValue& value, absl::Span<const ConfigKey> keys,
                               DaemonOptions* options);

// The keys of the schedule section and the checks across them
// (schedule_config_keys.cc).
absl::Span<const ConfigKey> ScheduleConfigKeys();
absl::Status CheckScheduleSection(const ConfigLocations& where, DaemonOptions* options);

// The keys of a schedule rule's anomaly section, and what opening it does:
// the rule becomes an anomaly rule (anomaly_config_keys.cc).
absl::Span<const ConfigKey> AnomalyRuleKeys();
void OpenAnomalyRule(DaemonOptions* options);

// A mapping of labels (team: ml), each pair valid as selectors take them
// (ValidateLabel), at most kMaxLabels; for schedule rules' selectors and
// auth.tokens' scopes (schedule_config_keys.cc).
absl::Status ReadLabelPairs(const ConfigValue& value,
                            std::vector<std::pair<std::string, std::string>>* out);

// The keys of the ipc section (ipc_config_keys.cc).
absl::Span<const ConfigKey> IpcConfigKeys();

// The keys of the kineto section (kineto_config_keys.cc).
absl::Span<const ConfigKey> KinetoConfigKeys();

// A socket file's permission bits ("0660") and a group name or gid, as
// ipc.socket_mode / ipc.socket_group and listen_mode / listen_group take
// them (ipc_config_keys.cc).
absl::Status ReadSocketMode(const ConfigValue& value, uint32_t* mode);
absl::Status ReadGroupName(const ConfigValue& value, std::string* group);

// The keys of the kineto section (kineto_config_keys.cc).
absl::Span<const ConfigKey> KinetoConfigKeys();

// The keys of the host_context section (host_context_config_keys.cc).
absl::Span<const ConfigKey> HostContextConfigKeys();

// The keys of the metrics section (metrics_config_keys.cc).
absl::Span<const ConfigKey> MetricsConfigKeys();

// The keys of the tls and auth sections (security_config_keys.cc).
absl::Span<const ConfigKey> TlsConfigKeys();
absl::Span<const ConfigKey> AuthConfigKeys();

// The keys of store.s3 and the checks across them (s3_config_keys.cc).
absl::Span<const ConfigKey> S3ConfigKeys();
void OpenS3Section(DaemonOptions* options);
absl::Status CheckS3Section(const ConfigLocations& where, DaemonOptions* options);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CONFIG_CONFIG_SCHEMA_H_
