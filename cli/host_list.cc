#include "cli/host_list.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli/connection.h"
#include "cli/format.h"

namespace gpuctl::cli {
namespace {

constexpr absl::string_view kDnsPrefix = "dns:";
constexpr absl::string_view kDnsHelp = "expected dns:NAME or dns:NAME:PORT";

bool IsDnsSpec(absl::string_view text) {
  // "dns:///name" is a gRPC target (gRPC resolves it and picks one address).
  return absl::StartsWith(text, kDnsPrefix) && !absl::StartsWith(text, "dns:/");
}

bool ValidDnsName(absl::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '-' && c != '_') return false;
  }
  return true;
}

absl::StatusOr<int> ParsePort(absl::string_view text) {
  int port = 0;
  if (text.empty() || text.size() > 5 || text.find_first_not_of("0123456789") != text.npos ||
      !absl::SimpleAtoi(text, &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError("bad port");
  }
  return port;
}

// One flag value or file line: a DNS spec or a host.
absl::StatusOr<HostSpec> ParseOne(absl::string_view text) {
  if (IsDnsSpec(text)) return ParseDnsSpec(text);
  absl::StatusOr<std::string> target = NormalizeHost(text);
  if (!target.ok()) return target.status();
  HostSpec spec;
  spec.target = *target;
  spec.origin = std::string(text);
  return spec;
}

std::string TargetFor(const std::string& address, int port) {
  if (address.find(':') != std::string::npos) return absl::StrCat("[", address, "]:", port);
  return absl::StrCat(address, ":", port);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ResolveAddresses(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  int rc = getaddrinfo(name.c_str(), nullptr, &hints, &list);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot resolve ", name, ": ", rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc)));
  }
  std::vector<std::string> addresses;
  std::set<std::string> seen;
  for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = nullptr;
    if (ai->ai_family == AF_INET) {
      raw = &reinterpret_cast<const sockaddr_in*>(ai->ai_addr)->sin_addr;
    } else if (ai->ai_family == AF_INET6) {
      raw = &reinterpret_cast<const sockaddr_in6*>(ai->ai_addr)->sin6_addr;
    } else {
      continue;
    }
    if (inet_ntop(ai->ai_family, raw, text, sizeof(text)) == nullptr) continue;
    if (seen.insert(text).second) addresses.push_back(text);
  }
  freeaddrinfo(list);
  if (addresses.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", name, ": no address"));
  }
  return addresses;
}

absl::StatusOr<HostSpec> ParseDnsSpec(absl::string_view text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid host list \"", Printable(text), "\": ", why, "; ", kDnsHelp));
  };
  absl::string_view rest = text;
  if (!absl::ConsumePrefix(&rest, kDnsPrefix)) return bad("not a dns: name");
  HostSpec spec;
  spec.origin = std::string(text);
  spec.dns_port = kDefaultPort;
  absl::string_view name = rest;
  absl::string_view port;
  if (absl::StartsWith(rest, "[")) {
    size_t close = rest.find(']');
    if (close == rest.npos || close == 1) return bad("unclosed or empty [ ]");
    name = rest.substr(1, close - 1);
    absl::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return bad("junk after ]");
      port = after.substr(1);
      if (port.empty()) return bad("empty port");
    }
    in6_addr ignored;
    if (inet_pton(AF_INET6, std::string(name).c_str(), &ignored) != 1) {
      return bad("not an IPv6 address in [ ]");
    }
  } else {
    size_t colon = rest.find(':');
    if (colon != rest.npos) {
      name = rest.substr(0, colon);
      port = rest.substr(colon + 1);
      if (port.empty()) return bad("empty port");
    }
    if (!ValidDnsName(name)) return bad("the name must be letters, digits, '.', '-' or '_'");
  }
  if (!port.empty()) {
    absl::StatusOr<int> p = ParsePort(port);
    if (!p.ok()) return bad("the port must be 1-65535");
    spec.dns_port = *p;
  }
  spec.dns_name = std::string(name);
  return spec;
}

absl::StatusOr<std::vector<HostSpec>> ReadHostsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--hosts-file ", path, ": cannot read: ", std::strerror(errno)));
  }
  std::string content;
  content.resize(kMaxHostsFileBytes + 1);
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat("--hosts-file ", path, ": read error"));
  }
  content.resize(static_cast<size_t>(in.gcount()));
  if (content.size() > kMaxHostsFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--hosts-file ", path, ": larger than ", kMaxHostsFileBytes >> 20, " MiB"));
  }
  std::vector<HostSpec> specs;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(content, '\n')) {
    ++line_number;
    line = line.substr(0, line.find('#'));
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    auto where = [&] { return absl::StrCat("--hosts-file ", path, ":", line_number, ": "); };
    if (std::any_of(line.begin(), line.end(), absl::ascii_isspace)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), "one host per line, got \"", Printable(line), "\""));
    }
    absl::StatusOr<HostSpec> spec = ParseOne(line);
    if (!spec.ok())
      return absl::InvalidArgumentError(absl::StrCat(where(), spec.status().message()));
    specs.push_back(*std::move(spec));
    if (specs.size() > kMaxHosts) {
      return absl::InvalidArgumentError(
          absl::StrCat("--hosts-file ", path, ": more than ", kMaxHosts, " hosts"));
    }
  }
  if (specs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--hosts-file ", path, ": no host in the file"));
  }
  return specs;
}

absl::StatusOr<std::vector<HostSpec>> ParseHostFlags(const HostFlags& flags,
                                                     absl::string_view env_host) {
  std::vector<HostSpec> specs;
  for (const std::string& host : flags.hosts) {
    absl::StatusOr<HostSpec> spec = ParseOne(host);
    if (!spec.ok())
      return absl::InvalidArgumentError(absl::StrCat("--host: ", spec.status().message()));
    specs.push_back(*std::move(spec));
  }
  for (const std::string& path : flags.hosts_files) {
    absl::StatusOr<std::vector<HostSpec>> file = ReadHostsFile(path);
    if (!file.ok()) return file.status();
    specs.insert(specs.end(), file->begin(), file->end());
  }
  for (const std::string& dns : flags.dns) {
    absl::StatusOr<HostSpec> spec = ParseDnsSpec(dns);
    if (!spec.ok())
      return absl::InvalidArgumentError(absl::StrCat("--hosts: ", spec.status().message()));
    specs.push_back(*std::move(spec));
  }
  if (specs.size() > kMaxHosts) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", kMaxHosts, " hosts"));
  }
  if (!specs.empty()) return specs;
  absl::string_view fallback = env_host.empty() ? kDefaultHost : env_host;
  absl::StatusOr<HostSpec> spec = ParseOne(fallback);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(env_host.empty() ? "" : "$GPUCTL_HOST: ", spec.status().message()));
  }
  specs.push_back(*std::move(spec));
  return specs;
}

absl::StatusOr<std::vector<HostEntry>> ResolveHostSpecs(const std::vector<HostSpec>& specs,
                                                        const AddressResolver& resolver) {
  std::vector<HostEntry> entries;
  std::set<std::string> seen;
  auto add = [&](HostEntry entry) {
    if (seen.insert(entry.target).second) entries.push_back(std::move(entry));
  };
  for (const HostSpec& spec : specs) {
    if (spec.dns_name.empty()) {
      add(HostEntry{spec.target, ""});
      continue;
    }
    absl::StatusOr<std::vector<std::string>> addresses = resolver(spec.dns_name);
    if (!addresses.ok() || addresses->empty()) {
      add(HostEntry{spec.origin,
                    addresses.ok() ? absl::StrCat("cannot resolve ", spec.dns_name, ": no address")
                                   : std::string(addresses.status().message())});
      continue;
    }
    for (const std::string& address : *addresses) {
      add(HostEntry{TargetFor(address, spec.dns_port), ""});
    }
    if (entries.size() > kMaxHosts) break;
  }
  if (entries.size() > kMaxHosts) {
    return absl::InvalidArgumentError(
        absl::StrCat("the host list expands to more than ", kMaxHosts, " hosts"));
  }
  return entries;
}

}  // namespace gpuctl::cli
