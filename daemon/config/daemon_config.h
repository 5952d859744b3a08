#ifndef GPUCTL_DAEMON_CONFIG_DAEMON_CONFIG_H_
#define GPUCTL_DAEMON_CONFIG_DAEMON_CONFIG_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/config/daemon_options.h"

// gpuctld's YAML configuration file. docs/configuration.md describes every
// key; deploy/config/gpuctld.yaml is an annotated example.
namespace gpuctl::daemon {

// Larger files are refused: a configuration is a few kilobytes.
inline constexpr size_t kMaxConfigFileBytes = size_t{1} << 20;

// Where a configuration file set each key, so that checks made after the
// flags are merged can point at the right line.
class ConfigLocations {
 public:
  ConfigLocations() = default;
  explicit ConfigLocations(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }
  // The 1-based line where the file sets `key` ("store.retention.max_age",
  // or a section: "store.s3"); 0 when it does not.
  int Line(absl::string_view key) const;
  void Record(std::string key, int line) { lines_.insert_or_assign(std::move(key), line); }
  // "FILE:LINE: KEY: message" as INVALID_ARGUMENT.
  absl::Status Error(absl::string_view key, absl::string_view message) const;

 private:
  std::string file_;
  absl::flat_hash_map<std::string, int> lines_;
};

// Applies the YAML document `text` (named `file_name` in messages) to
// `*options`: the keys it sets replace their values, the others are kept.
// An empty document sets nothing. Unknown or repeated keys, values of the
// wrong type or out of range, and anything but a single mapping are
// INVALID_ARGUMENT, "FILE:LINE: KEY: what is wrong", and leave `*options`
// untouched.
absl::StatusOr<ConfigLocations> ParseDaemonConfig(absl::string_view text,
                                                  absl::string_view file_name,
                                                  DaemonOptions* options);

// ParseDaemonConfig on the file at `path` (at most kMaxConfigFileBytes).
// A file that cannot be read is INVALID_ARGUMENT too, with the reason.
absl::StatusOr<ConfigLocations> LoadDaemonConfigFile(const std::string& path,
                                                     DaemonOptions* options);

// Every key a file may set, dotted ("trace.max_duration"), in schema order;
// sections themselves are not listed.
std::vector<std::string> DaemonConfigKeys();

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CONFIG_DAEMON_CONFIG_H_
