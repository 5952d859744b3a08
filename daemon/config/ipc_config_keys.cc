// The ipc section: who may reach the IPC socket and attach a process.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/config/config_schema.h"
#include "daemon/ipc/socket_access.h"

namespace gpuctl::daemon {
namespace {

// A list is capped so that a typo'd generated file does not become a
// million-entry scan at every Hello.
constexpr size_t kMaxAllowedUids = 1024;

absl::Status ReadAllowedUids(const ConfigValue& v, DaemonOptions* o) {
  const YAML::Node& node = v.node();
  if (!node.IsSequence()) {
    return v.Error(
        absl::StrCat("expected a list of users (uids or names, like [1000, alice]), "
                     "found ",
                     DescribeNodeType(node)));
  }
  if (node.size() > kMaxAllowedUids) {
    return v.Error(absl::StrCat("lists ", node.size(), " users, more than ", kMaxAllowedUids));
  }
  std::vector<std::string> users;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node& item = node[i];
    if (!item.IsScalar()) {
      return v.Error(absl::StrCat("entry ", i + 1, " must be a uid or a user name, found ",
                                  DescribeNodeType(item)));
    }
    // Resolved at startup (ParseDaemonFlags); the shape is checked now.
    if (absl::Status s = CheckUserSpelling(item.Scalar()); !s.ok()) {
      return v.Error(absl::StrCat("entry ", i + 1, ": ", s.message()));
    }
    users.push_back(item.Scalar());
  }
  if (users.empty()) {
    return v.Error("an empty list would refuse every process; leave the key out to allow any uid");
  }
  o->allowed_users = std::move(users);
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadSocketMode(const ConfigValue& value, uint32_t* mode) {
  absl::StatusOr<std::string> text = value.String();
  if (!text.ok()) return text.status();
  absl::StatusOr<uint32_t> parsed = ParseSocketMode(*text);
  if (!parsed.ok()) return value.Error(parsed.status().message());
  *mode = *parsed;
  return absl::OkStatus();
}

absl::Status ReadGroupName(const ConfigValue& value, std::string* group) {
  absl::StatusOr<std::string> text = value.String();
  if (!text.ok()) return text.status();
  if (absl::Status s = CheckGroupSpelling(*text); !s.ok()) return value.Error(s.message());
  *group = *std::move(text);
  return absl::OkStatus();
}

namespace {

constexpr ConfigKey kIpcKeys[] = {
    {.name = "socket_mode",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return ReadSocketMode(v, &o->socket_mode); }},
    {.name = "socket_group",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return ReadGroupName(v, &o->socket_group); }},
    {.name = "allowed_uids", .read = ReadAllowedUids},
    {.name = "hello_rate",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           absl::StatusOr<uint64_t> rate = v.Count(0, kMaxHelloRate);
           if (!rate.ok()) return rate.status();
           o->hello_rate = static_cast<uint32_t>(*rate);
           return absl::OkStatus();
         }},
    {.name = "hello_burst",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           absl::StatusOr<uint64_t> burst = v.Count(1, kMaxHelloBurst);
           if (!burst.ok()) return burst.status();
           o->hello_burst = static_cast<uint32_t>(*burst);
           return absl::OkStatus();
         }},
};

}  // namespace

absl::Span<const ConfigKey> IpcConfigKeys() { return kIpcKeys; }

}  // namespace gpuctl::daemon
