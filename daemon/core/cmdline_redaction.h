#ifndef GPUCTL_DAEMON_CORE_CMDLINE_REDACTION_H_
#define GPUCTL_DAEMON_CORE_CMDLINE_REDACTION_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace gpuctl::daemon {

// What a redacted value becomes.
inline constexpr absl::string_view kRedacted = "***";

// A process's command line with what looks like a credential replaced by
// kRedacted, so that listings, logs and manifests never carry one:
// - a flag whose name has a credential word: password, passwd, secret*,
//   token, credential(s), apikey, or "key" after api, access, secret,
//   private, auth, client, encryption or signing (`--password=x`,
//   `--hf-token x`, `--aws-secret-access-key=x`, `-api_key x`): the value
//   after '=', else the next argument unless it is a flag itself;
// - NAME=value where NAME (letters, digits, '_', '-', '.') contains
//   PASSWORD, PASSWD, SECRET, TOKEN, KEY or CREDENTIAL, in any case, also as
//   a flag's value (`--env=API_KEY=x`);
// - the password of a URL's user:password@ (`https://u:***@host/`).
// Other flags (`--keyboard`, `--max-tokens=5`, `--sort-key=name`) are kept.
std::vector<std::string> RedactCommandLine(std::vector<std::string> args);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_CMDLINE_REDACTION_H_
