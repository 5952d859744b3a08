#ifndef GPUCTL_CLI_HOST_LIST_H_
#define GPUCTL_CLI_HOST_LIST_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuctl::cli {

// More daemons than this in one command is a mistake (a runaway hosts file
// or DNS answer), not a fleet.
inline constexpr size_t kMaxHosts = 65536;
// Largest --hosts-file read.
inline constexpr size_t kMaxHostsFileBytes = 16 << 20;

// The host flags of the fleet commands (`trace`, `ps`), as typed.
struct HostFlags {
  std::vector<std::string> hosts;        // --host HOST[:PORT] (or dns:NAME[:PORT])
  std::vector<std::string> hosts_files;  // --hosts-file FILE
  std::vector<std::string> dns;          // --hosts dns:NAME[:PORT]
};

// One entry of the host list before DNS: a gRPC target, or a DNS name
// whose every address is a daemon.
struct HostSpec {
  std::string target;  // normalized (NormalizeHost); empty for a DNS spec
  std::string dns_name;
  int dns_port = 0;
  std::string origin;  // what the user wrote, for messages
};

// A daemon to contact. `error` is set (and `target` is the DNS spec) when
// a DNS name resolved to nothing; the command reports that host as
// unreachable.
struct HostEntry {
  std::string target;
  std::string error;
};

// Name -> numeric addresses ("10.0.0.7", "fd00::7"), every A and AAAA
// record, in the resolver's order.
using AddressResolver =
    std::function<absl::StatusOr<std::vector<std::string>>(const std::string& name)>;

// getaddrinfo(3) with AF_UNSPEC, duplicates removed.
absl::StatusOr<std::vector<std::string>> ResolveAddresses(const std::string& name);

// Parses "dns:NAME[:PORT]" (NAME may be a bracketed IPv6 literal; default
// port 7070).
absl::StatusOr<HostSpec> ParseDnsSpec(absl::string_view text);

// Reads a hosts file: one HOST[:PORT] or dns:NAME[:PORT] per line; '#'
// starts a comment; blank lines are skipped. Errors name FILE:LINE.
absl::StatusOr<std::vector<HostSpec>> ReadHostsFile(const std::string& path);

// Every host flag, in the order --host, --hosts-file, --hosts; when none is
// given, `env_host` ($GPUCTL_HOST), else 127.0.0.1:7070. Syntax errors and
// unreadable files are INVALID_ARGUMENT (a usage error).
absl::StatusOr<std::vector<HostSpec>> ParseHostFlags(const HostFlags& flags,
                                                     absl::string_view env_host);

// Expands DNS specs into one target per address ("10.0.0.7:7070",
// "[fd00::7]:7070") and removes duplicate targets, keeping the first.
// INVALID_ARGUMENT when the result is larger than kMaxHosts.
absl::StatusOr<std::vector<HostEntry>> ResolveHostSpecs(
    const std::vector<HostSpec>& specs, const AddressResolver& resolver = ResolveAddresses);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_HOST_LIST_H_
