#include "daemon/core/hello_validation.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/selector.h"

namespace gpuctl::daemon {
namespace {

absl::Status CheckSize(absl::string_view field, absl::string_view value, size_t max) {
  if (value.size() > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("Hello ", field, " is ", value.size(), " bytes, more than ", max));
  }
  return absl::OkStatus();
}

absl::Status CheckRankField(absl::string_view field, int32_t value) {
  if (value < -1) {
    return absl::InvalidArgumentError(absl::StrCat("Hello ", field, " ", value, " is below -1"));
  }
  return absl::OkStatus();
}

absl::Status CheckIdentity(const PeerCredentials& creds, const v1::ipc::Hello& hello,
                           const ProcReader& proc) {
  if (hello.protocol_major() != kIpcProtocolMajor) {
    return absl::FailedPreconditionError(absl::StrCat(
        "client speaks IPC protocol ", hello.protocol_major(), ".", hello.protocol_minor(),
        ", daemon speaks ", kIpcProtocolMajor, ".", kIpcProtocolMinor));
  }
  if (hello.pid() != creds.pid && proc.InnermostPid(creds.pid) != hello.pid()) {
    return absl::PermissionDeniedError(absl::StrCat("Hello claims pid ", hello.pid(),
                                                    " but the socket belongs to pid ", creds.pid));
  }
  return absl::OkStatus();
}

absl::Status CheckStrings(const v1::ipc::Hello& hello) {
  if (auto st = CheckSize("job_id", hello.job_id(), kMaxJobIdBytes); !st.ok()) return st;
  if (auto st = CheckSize("hostname", hello.hostname(), kMaxHostnameBytes); !st.ok()) return st;
  if (auto st = CheckSize("library_version", hello.library_version(), kMaxVersionBytes); !st.ok()) {
    return st;
  }
  if (static_cast<size_t>(hello.cmdline_size()) > kMaxCmdlineArgs) {
    return absl::InvalidArgumentError(absl::StrCat("Hello cmdline has ", hello.cmdline_size(),
                                                   " arguments, more than ", kMaxCmdlineArgs));
  }
  size_t cmdline_bytes = 0;
  for (const std::string& arg : hello.cmdline()) cmdline_bytes += arg.size();
  if (cmdline_bytes > kMaxCmdlineBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("Hello cmdline is ", cmdline_bytes, " bytes, more than ", kMaxCmdlineBytes));
  }
  return absl::OkStatus();
}

absl::Status CheckRanks(const v1::ipc::Hello& hello) {
  if (auto st = CheckRankField("rank", hello.rank()); !st.ok()) return st;
  if (auto st = CheckRankField("local_rank", hello.local_rank()); !st.ok()) return st;
  if (auto st = CheckRankField("world_size", hello.world_size()); !st.ok()) return st;
  if (hello.rank() >= 0 && hello.world_size() > 0 && hello.rank() >= hello.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Hello rank ", hello.rank(), " is not below world_size ", hello.world_size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateHello(const PeerCredentials& creds, const v1::ipc::Hello& hello,
                           const ProcReader& proc) {
  if (auto st = CheckIdentity(creds, hello, proc); !st.ok()) return st;
  if (auto st = CheckStrings(hello); !st.ok()) return st;
  if (auto st = CheckRanks(hello); !st.ok()) return st;
  return ParseHelloLabels(hello).status();
}

absl::Status ValidateHello(const PeerCredentials& creds, const v1::ipc::Hello& hello,
                           absl::string_view proc_root) {
  return ValidateHello(creds, hello, ProcfsReader(std::string(proc_root)));
}

absl::StatusOr<absl::btree_map<std::string, std::string>> ParseHelloLabels(
    const v1::ipc::Hello& hello) {
  if (static_cast<size_t>(hello.labels_size()) > kMaxLabels) {
    return absl::InvalidArgumentError(
        absl::StrCat("Hello has ", hello.labels_size(), " labels, more than ", kMaxLabels));
  }
  absl::btree_map<std::string, std::string> labels;
  for (const std::string& label : hello.labels()) {
    size_t eq = label.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Hello label \"", absl::CHexEscape(label.substr(0, 64)), "\" is not key=value"));
    }
    absl::string_view key = absl::string_view(label).substr(0, eq);
    absl::string_view value = absl::string_view(label).substr(eq + 1);
    if (auto st = ValidateLabel("Hello label", key, value); !st.ok()) return st;
    if (!labels.emplace(key, value).second) {
      return absl::InvalidArgumentError(absl::StrCat("Hello label ", key, " appears twice"));
    }
  }
  return labels;
}

}  // namespace gpuctl::daemon
