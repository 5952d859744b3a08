#include "daemon/s3/s3_config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gpuctl::s3 {
namespace {

bool IsIpv4(const std::string& host) {
  in_addr addr;
  return ::inet_pton(AF_INET, host.c_str(), &addr) == 1;
}

bool IsValidDnsName(absl::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(host, '.')) {
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
    }
  }
  return true;
}

absl::Status EndpointError(absl::string_view endpoint, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("S3 endpoint \"", endpoint, "\": ", why));
}

absl::Status ParseHostPort(absl::string_view endpoint, absl::string_view authority,
                           S3Endpoint* out) {
  absl::string_view host = authority;
  absl::string_view port;
  if (absl::StartsWith(authority, "[")) {
    size_t close = authority.find(']');
    if (close == absl::string_view::npos) return EndpointError(endpoint, "unterminated '['");
    host = authority.substr(0, close + 1);
    absl::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return EndpointError(endpoint, "junk after the IPv6 address");
      port = rest.substr(1);
    }
    std::string literal(host.substr(1, host.size() - 2));
    in6_addr addr;
    if (::inet_pton(AF_INET6, literal.c_str(), &addr) != 1) {
      return EndpointError(endpoint, "invalid IPv6 address");
    }
    out->host_is_ip = true;
  } else {
    size_t colon = authority.rfind(':');
    if (colon != absl::string_view::npos) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
    }
    if (!IsValidDnsName(host)) return EndpointError(endpoint, "invalid host name");
    out->host_is_ip = IsIpv4(std::string(host));
  }
  if (authority.size() > host.size() || !port.empty()) {
    int value = 0;
    if (port.empty() || port.size() > 5 || !absl::SimpleAtoi(port, &value) || value < 1 ||
        value > 65535 || !absl::ascii_isdigit(static_cast<unsigned char>(port.front()))) {
      return EndpointError(endpoint, "port must be 1-65535");
    }
  }
  out->host = absl::AsciiStrToLower(host);
  out->port = std::string(port);
  return absl::OkStatus();
}

absl::Status PositiveDuration(absl::string_view name, absl::Duration d) {
  if (d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("S3 ", name, " must be positive"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string S3Endpoint::Origin(absl::string_view host_prefix) const {
  std::string origin = absl::StrCat(scheme, "://", host_prefix, host);
  if (!port.empty()) absl::StrAppend(&origin, ":", port);
  return origin;
}

absl::StatusOr<S3Endpoint> ParseS3Endpoint(absl::string_view endpoint) {
  S3Endpoint out;
  absl::string_view rest = endpoint;
  std::string lower = absl::AsciiStrToLower(endpoint.substr(0, 8));
  if (absl::StartsWith(lower, "http://")) {
    out.scheme = "http";
    rest.remove_prefix(7);
  } else if (absl::StartsWith(lower, "https://")) {
    out.scheme = "https";
    rest.remove_prefix(8);
  } else {
    return EndpointError(endpoint, "must start with http:// or https://");
  }
  if (absl::EndsWith(rest, "/")) rest.remove_suffix(1);
  for (char c : rest) {
    if (c == '/' || c == '?' || c == '#' || c == '@') {
      return EndpointError(endpoint, "must be scheme://host[:port] without path, query or user");
    }
  }
  if (rest.empty()) return EndpointError(endpoint, "missing host");
  if (auto st = ParseHostPort(endpoint, rest, &out); !st.ok()) return st;
  return out;
}

bool IsValidBucketName(absl::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (char c : bucket) {
    if (!absl::ascii_islower(static_cast<unsigned char>(c)) &&
        !absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '.' && c != '-') {
      return false;
    }
  }
  auto alnum = [](char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); };
  if (!alnum(bucket.front()) || !alnum(bucket.back())) return false;
  if (absl::StrContains(bucket, "..")) return false;
  return !IsIpv4(std::string(bucket));
}

absl::Status ValidateObjectKey(absl::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError("S3 object key is empty");
  if (key.size() > kMaxKeyLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("S3 object key is ", key.size(), " bytes, over ", kMaxKeyLength));
  }
  for (char c : key) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat("S3 object key \"", absl::CEscape(key), "\" has a control character"));
    }
  }
  return absl::OkStatus();
}

absl::Duration ExponentialBackoff(absl::Duration initial, absl::Duration max, int attempt) {
  absl::Duration cap = initial;
  for (int i = 1; i < attempt && cap < max; ++i) cap *= 2;
  return std::min(cap, max);
}

absl::Status ValidateKeyPrefix(absl::string_view prefix) {
  if (prefix.empty()) return absl::OkStatus();
  if (auto st = ValidateObjectKey(prefix); !st.ok()) return st;
  if (prefix.front() == '/' || prefix.back() == '/' || absl::StrContains(prefix, "//")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "S3 key prefix \"", prefix, "\" must not start or end with '/' or contain \"//\""));
  }
  return absl::OkStatus();
}

absl::Status ValidateS3Config(const S3Config& config) {
  auto endpoint = ParseS3Endpoint(config.endpoint);
  if (!endpoint.ok()) return endpoint.status();
  if (config.region.empty() || config.region.size() > 64) {
    return absl::InvalidArgumentError("S3 region must be 1-64 characters");
  }
  for (char c : config.region) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
      return absl::InvalidArgumentError(
          absl::StrCat("S3 region \"", config.region, "\" may hold only letters, digits, - and _"));
    }
  }
  if (!IsValidBucketName(config.bucket)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "S3 bucket \"", config.bucket,
        "\" is not a valid bucket name (3-63 of a-z 0-9 . -, starting and ending alphanumeric)"));
  }
  if (!config.path_style && endpoint->host_is_ip) {
    return absl::InvalidArgumentError(
        absl::StrCat("S3 endpoint ", config.endpoint,
                     " is an IP address: virtual-hosted buckets need a DNS name; use path style"));
  }
  if (auto st = ValidateKeyPrefix(config.prefix); !st.ok()) return st;
  if (config.profile.empty() && !config.credentials_file.empty()) {
    return absl::InvalidArgumentError("S3 credentials profile is empty");
  }
  for (auto [name, d] : {std::pair{"connect_timeout", config.connect_timeout},
                         std::pair{"request_timeout", config.request_timeout},
                         std::pair{"idle_timeout", config.idle_timeout},
                         std::pair{"initial_backoff", config.initial_backoff},
                         std::pair{"max_backoff", config.max_backoff}}) {
    if (auto st = PositiveDuration(name, d); !st.ok()) return st;
  }
  if (config.max_attempts < 1 || config.max_attempts > 20) {
    return absl::InvalidArgumentError("S3 max_attempts must be 1-20");
  }
  if (config.part_size < kMinPartSize || config.part_size > kMaxPartSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("S3 part_size ", config.part_size, " is outside [5 MiB, 5 GiB]"));
  }
  if (config.multipart_threshold < kMinPartSize || config.multipart_threshold > kMaxPartSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "S3 multipart_threshold ", config.multipart_threshold, " is outside [5 MiB, 5 GiB]"));
  }
  return absl::OkStatus();
}

}  // namespace gpuctl::s3
