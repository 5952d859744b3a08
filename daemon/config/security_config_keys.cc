// The tls and auth sections: the gRPC API's transport security and bearer
// tokens. Files are named here and read at startup (daemon/rpc).
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/config/config_schema.h"
#include "daemon/core/token_scope.h"

namespace gpuctl::daemon {
namespace {

// A path: a non-empty string.
absl::Status ReadSecurityPath(const ConfigValue& v, std::string* out) {
  absl::StatusOr<std::string> text = v.String();
  if (!text.ok()) return text.status();
  if (text->empty()) return v.Error("must not be empty; leave the key out instead");
  *out = *std::move(text);
  return absl::OkStatus();
}

constexpr ConfigKey kTlsKeys[] = {
    {.name = "cert",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return ReadSecurityPath(v, &o->tls_cert); }},
    {.name = "key",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return ReadSecurityPath(v, &o->tls_key); }},
    {.name = "client_ca",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return ReadSecurityPath(v, &o->tls_client_ca); }},
};

ScopedTokenOptions& CurrentToken(DaemonOptions* o) { return o->auth_tokens.back(); }

// A list of non-empty strings, at most kMaxScopeEntries.
absl::Status ReadStringList(const ConfigValue& v, std::vector<std::string>* out) {
  const YAML::Node& node = v.node();
  if (!node.IsSequence()) {
    return v.Error(absl::StrCat("expected a list, found ", DescribeNodeType(node)));
  }
  if (node.size() > kMaxScopeEntries) {
    return v.Error(absl::StrCat("more than ", kMaxScopeEntries, " entries"));
  }
  out->clear();
  for (size_t i = 0; i < node.size(); ++i) {
    ConfigValue entry(node[i], absl::StrCat(v.key(), "[", i, "]"), LineOf(node[i]), v.file(),
                      false);
    absl::StatusOr<std::string> text = entry.String();
    if (!text.ok()) return text.status();
    out->push_back(*std::move(text));
  }
  return absl::OkStatus();
}

constexpr ConfigKey kTokenKeys[] = {
    {.name = "name",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return StoreTo(v.String(), &CurrentToken(o).scope.name); }},
    {.name = "token_file",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return ReadSecurityPath(v, &CurrentToken(o).token_file); }},
    {.name = "jobs",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return ReadStringList(v, &CurrentToken(o).scope.jobs); }},
    {.name = "namespaces",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return ReadStringList(v, &CurrentToken(o).scope.namespaces); }},
    {.name = "labels",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return ReadLabelPairs(v, &CurrentToken(o).scope.labels); }},
};

// auth.tokens: a list of {name, token_file, jobs, namespaces, labels}.
absl::Status ReadScopedTokens(const ConfigValue& v, DaemonOptions* o) {
  o->auth_tokens.clear();
  const YAML::Node& node = v.node();
  if (!node.IsSequence()) {
    return v.Error(absl::StrCat("expected a list of tokens, found ", DescribeNodeType(node)));
  }
  if (node.size() > kMaxScopedTokens) {
    return v.Error(absl::StrCat("lists ", node.size(), " tokens, more than ", kMaxScopedTokens));
  }
  std::set<std::string> names;
  for (size_t i = 0; i < node.size(); ++i) {
    ConfigValue entry(node[i], absl::StrCat(v.key(), "[", i, "]"), LineOf(node[i]), v.file(),
                      false);
    if (!node[i].IsMap()) {
      return entry.Error(
          absl::StrCat("expected a token (a mapping with name, token_file, jobs, "
                       "namespaces, labels), found ",
                       DescribeNodeType(node[i])));
    }
    o->auth_tokens.emplace_back();
    if (absl::Status s = ReadConfigMapping(entry, kTokenKeys, o); !s.ok()) return s;
    if (CurrentToken(o).token_file.empty()) return entry.Error("needs a token_file");
    if (absl::Status s = ValidateTokenScope(CurrentToken(o).scope); !s.ok()) {
      return entry.Error(s.message());
    }
    if (!names.insert(CurrentToken(o).scope.name).second) {
      return entry.Error(absl::StrCat("the name \"", CurrentToken(o).scope.name,
                                      "\" is given to another token too"));
    }
  }
  return absl::OkStatus();
}

constexpr ConfigKey kAuthKeys[] = {
    {.name = "token_file",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return ReadSecurityPath(v, &o->auth_token_file); }},
    {.name = "tokens", .read = ReadScopedTokens},
};

}  // namespace

absl::Span<const ConfigKey> TlsConfigKeys() { return kTlsKeys; }
absl::Span<const ConfigKey> AuthConfigKeys() { return kAuthKeys; }

}  // namespace gpuctl::daemon
