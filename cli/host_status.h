#ifndef GPUCTL_CLI_HOST_STATUS_H_
#define GPUCTL_CLI_HOST_STATUS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuctl::cli {

// How one daemon of a fleet command fared.
enum class HostStatus {
  kOk,              // it did all that was asked
  kFailed,          // it accepted the request, but some process or the stream or download failed
  kNothingMatched,  // no attached process matched the selection (NOT_FOUND)
  kUnreachable,     // no connection, or the connection broke before an answer
  kRefused,         // it answered with an error (INVALID_ARGUMENT, PERMISSION_DENIED, ...)
  kTimedOut,        // no answer within the per-host deadline, or the trace did not finish
  kCancelled,       // the user interrupted the command
};

// "ok", "failed", "nothing_matched", "unreachable", "refused", "timed_out",
// "cancelled": the --json value.
absl::string_view HostStatusName(HostStatus status);
// The same for people: "nothing matched", "timed out", ...
std::string HostStatusWord(HostStatus status);

// A failure before the daemon answered: what it was and a message naming
// the host. `status` comes from Connect or a call (FromRpcStatus); a local
// CANCELLED is kCancelled.
struct HostFailure {
  HostStatus status;
  std::string error;
};
HostFailure ClassifyFailure(const absl::Status& status, absl::string_view target);

// The exit code of a fleet command (cli/exit_codes.h) from its hosts,
// `accepted` telling which hosts took the request (answered it, or started
// the trace): all ok -> 0; none accepted and every one found nothing ->
// kExitNothingMatched; none accepted and none found nothing (unreachable,
// refused, timed out) -> kExitDaemonError; otherwise kExitPartialFailure.
// Interrupted commands exit with kExitInterrupted before this applies.
int FleetExitCode(const std::vector<HostStatus>& statuses, const std::vector<bool>& accepted);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_HOST_STATUS_H_
