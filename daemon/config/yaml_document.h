#ifndef GPUCTL_DAEMON_CONFIG_YAML_DOCUMENT_H_
#define GPUCTL_DAEMON_CONFIG_YAML_DOCUMENT_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "yaml-cpp/yaml.h"

namespace gpuctl::daemon {

// The one YAML document in `text`, or a null node when there is none (an
// empty file, only comments). Malformed YAML and a second document are
// INVALID_ARGUMENT, "FILE:LINE[:COLUMN]: what is wrong", with `file` naming
// the text.
absl::StatusOr<YAML::Node> LoadSingleYamlDocument(absl::string_view text, absl::string_view file);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CONFIG_YAML_DOCUMENT_H_
