#include "cli/host_status.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "cli/connection.h"
#include "cli/exit_codes.h"
#include "cli/format.h"

namespace gpuctl::cli {

absl::string_view HostStatusName(HostStatus status) {
  switch (status) {
    case HostStatus::kOk:
      return "ok";
    case HostStatus::kFailed:
      return "failed";
    case HostStatus::kNothingMatched:
      return "nothing_matched";
    case HostStatus::kUnreachable:
      return "unreachable";
    case HostStatus::kRefused:
      return "refused";
    case HostStatus::kTimedOut:
      return "timed_out";
    case HostStatus::kCancelled:
      return "cancelled";
  }
  return "failed";
}

std::string HostStatusWord(HostStatus status) {
  return absl::StrReplaceAll(HostStatusName(status), {{"_", " "}});
}

HostFailure ClassifyFailure(const absl::Status& status, absl::string_view target) {
  const std::string message = Printable(status.message());
  if (!IsRpcError(status)) {
    if (absl::IsCancelled(status)) return {HostStatus::kCancelled, "cancelled"};
    return {HostStatus::kFailed, message};
  }
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      return {HostStatus::kNothingMatched, message};
    case absl::StatusCode::kUnavailable:
      return {HostStatus::kUnreachable,
              absl::StrCat("cannot reach gpuctld at ", target, ": ", message)};
    case absl::StatusCode::kDeadlineExceeded:
      return {HostStatus::kTimedOut,
              absl::StrCat("gpuctld at ", target, " did not answer in time: ", message)};
    case absl::StatusCode::kCancelled:
      return {HostStatus::kCancelled, "cancelled"};
    case absl::StatusCode::kUnauthenticated:
      return {HostStatus::kRefused, absl::StrCat("gpuctld at ", target, " ", kUnauthenticatedText,
                                                 message, kUnauthenticatedHint)};
    default:
      return {HostStatus::kRefused,
              absl::StrCat("gpuctld at ", target, " refused the request: ", message)};
  }
}

int FleetExitCode(const std::vector<HostStatus>& statuses, const std::vector<bool>& accepted) {
  if (std::all_of(statuses.begin(), statuses.end(),
                  [](HostStatus s) { return s == HostStatus::kOk; })) {
    return kExitOk;
  }
  if (std::any_of(accepted.begin(), accepted.end(), [](bool a) { return a; })) {
    return kExitPartialFailure;
  }
  size_t nothing = std::count(statuses.begin(), statuses.end(), HostStatus::kNothingMatched);
  if (nothing == statuses.size()) return kExitNothingMatched;
  if (nothing == 0) return kExitDaemonError;
  return kExitPartialFailure;
}

}  // namespace gpuctl::cli
