#ifndef GPUCTL_DAEMON_CONFIG_CONFIG_VALUE_H_
#define GPUCTL_DAEMON_CONFIG_CONFIG_VALUE_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "yaml-cpp/yaml.h"

namespace gpuctl::daemon {

// Whether a duration key takes 0 ("0" meaning none or unlimited).
enum class ZeroDuration { kAllowed, kRefused };

// One key's value in a configuration file, read strictly: the typed
// readers fail with "FILE:LINE: KEY: what is wrong" (INVALID_ARGUMENT).
// Refers to `file`, which must outlive it.
class ConfigValue {
 public:
  // A secret's value is never quoted in messages.
  ConfigValue(const YAML::Node& node, std::string key, int line, const std::string& file,
              bool secret)
      : node_(node), key_(std::move(key)), line_(line), file_(file), secret_(secret) {}

  const std::string& key() const { return key_; }
  int line() const { return line_; }
  const std::string& file() const { return file_; }
  const YAML::Node& node() const { return node_; }

  // "FILE:LINE: KEY: message" as INVALID_ARGUMENT.
  absl::Status Error(absl::string_view message) const;

  // A scalar without control characters. A plain true/false, or no value,
  // is refused: quote it to mean the text.
  absl::StatusOr<std::string> String() const;
  // Plain true or false (also True, TRUE, False, FALSE); not yes/no/on/off.
  absl::StatusOr<bool> Bool() const;
  // ParseConfigDuration's syntax; a positive value unless zero is allowed.
  absl::StatusOr<absl::Duration> Duration(ZeroDuration zero) const;
  // ParseByteSize's syntax.
  absl::StatusOr<uint64_t> Size() const;
  // A whole number within [min, max].
  absl::StatusOr<uint64_t> Count(uint64_t min, uint64_t max) const;

 private:
  // The scalar's text, or an error saying that `expected` was wanted.
  absl::StatusOr<std::string> ScalarText(absl::string_view expected) const;
  // The text quoted for a message, or "the value" for a secret.
  std::string Shown(absl::string_view text) const;

  YAML::Node node_;
  std::string key_;
  int line_;
  const std::string& file_;
  bool secret_;
};

// "a mapping", "a list", "no value": what a node is, for messages.
absl::string_view DescribeNodeType(const YAML::Node& node);

// The 1-based line of a node's position in the file.
inline int LineOf(const YAML::Node& node) { return node.Mark().line + 1; }

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CONFIG_CONFIG_VALUE_H_
