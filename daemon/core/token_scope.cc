#include "daemon/core/token_scope.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/core/selector.h"

namespace gpuctl::daemon {
namespace {

constexpr size_t kMaxScopeNameBytes = 64;

bool IsScopeNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

bool ScopeListHas(const std::vector<std::string>& list, absl::string_view value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

absl::Status Denied(const TokenScope& scope, absl::string_view lacks) {
  return absl::PermissionDeniedError(
      absl::StrCat(DescribeTokenScope(scope), " may not trace this selection: ", lacks));
}

}  // namespace

absl::Status ValidateTokenScope(const TokenScope& scope) {
  if (scope.name.empty() || scope.name.size() > kMaxScopeNameBytes ||
      !std::all_of(scope.name.begin(), scope.name.end(), IsScopeNameChar)) {
    return absl::InvalidArgumentError(absl::StrCat("token name ", QuoteExcerpt(scope.name),
                                                   " must be 1-", kMaxScopeNameBytes,
                                                   " characters of A-Z a-z 0-9 . _ -"));
  }
  if (scope.jobs.empty() && scope.namespaces.empty() && scope.labels.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token \"", scope.name,
                     "\" has no jobs, namespaces or labels: a token for everything is "
                     "auth.token_file"));
  }
  for (const auto* list : {&scope.jobs, &scope.namespaces}) {
    if (list->size() > kMaxScopeEntries) {
      return absl::InvalidArgumentError(
          absl::StrCat("token \"", scope.name, "\" lists more than ", kMaxScopeEntries, " values"));
    }
  }
  if (scope.labels.size() > kMaxScopeEntries) {
    return absl::InvalidArgumentError(
        absl::StrCat("token \"", scope.name, "\" lists more than ", kMaxScopeEntries, " labels"));
  }
  for (const std::string& job : scope.jobs) {
    if (job.empty() || job.size() > kMaxJobIdBytes) {
      return absl::InvalidArgumentError(absl::StrCat("token \"", scope.name, "\": job id ",
                                                     QuoteExcerpt(job), " must be 1-",
                                                     kMaxJobIdBytes, " bytes"));
    }
  }
  for (const std::string& ns : scope.namespaces) {
    if (absl::Status s = ValidateLabel("token namespace", kNamespaceLabel, ns); !s.ok()) return s;
    if (ns.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token \"", scope.name, "\": a namespace must not be empty"));
    }
  }
  for (const auto& [key, value] : scope.labels) {
    if (absl::Status s = ValidateLabel("token label", key, value); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string DescribeTokenScope(const TokenScope& scope) {
  std::vector<std::string> rules;
  if (!scope.jobs.empty()) {
    rules.push_back(
        absl::StrCat(scope.jobs.size() == 1 ? "job " : "jobs ", absl::StrJoin(scope.jobs, ", ")));
  }
  if (!scope.namespaces.empty()) {
    rules.push_back(absl::StrCat(scope.namespaces.size() == 1 ? "namespace " : "namespaces ",
                                 absl::StrJoin(scope.namespaces, ", ")));
  }
  for (const auto& [key, value] : scope.labels) {
    rules.push_back(absl::StrCat("label ", key, "=", value));
  }
  return absl::StrCat("token \"", scope.name, "\" (", absl::StrJoin(rules, "; "), ")");
}

absl::Status CheckSelectorInScope(const TokenScope& scope, const v1::ProcessSelector& selector) {
  if (!scope.jobs.empty() && !ScopeListHas(scope.jobs, selector.job_id())) {
    return Denied(scope, selector.job_id().empty()
                             ? std::string("name one of its jobs (--job)")
                             : absl::StrCat("job \"", selector.job_id(), "\" is not one of its"));
  }
  if (!scope.namespaces.empty()) {
    auto it = selector.labels().find(std::string(kNamespaceLabel));
    if (it == selector.labels().end() || !ScopeListHas(scope.namespaces, it->second)) {
      return Denied(scope, absl::StrCat("select one of its namespaces (--label ", kNamespaceLabel,
                                        "=NAMESPACE)"));
    }
  }
  for (const auto& [key, value] : scope.labels) {
    auto it = selector.labels().find(key);
    if (it == selector.labels().end() || it->second != value) {
      return Denied(scope, absl::StrCat("select label ", key, "=", value, " (--label)"));
    }
  }
  return absl::OkStatus();
}

bool ProcessInScope(const TokenScope& scope, const v1::ProcessInfo& process) {
  if (!scope.jobs.empty() && !ScopeListHas(scope.jobs, process.job_id())) return false;
  if (!scope.namespaces.empty()) {
    auto it = process.labels().find(std::string(kNamespaceLabel));
    if (it == process.labels().end() || !ScopeListHas(scope.namespaces, it->second)) return false;
  }
  for (const auto& [key, value] : scope.labels) {
    auto it = process.labels().find(key);
    if (it == process.labels().end() || it->second != value) return false;
  }
  return true;
}

bool ManifestInScope(const TokenScope& scope, const v1::TraceManifest& manifest,
                     absl::string_view requested_by_token) {
  if (!requested_by_token.empty() && requested_by_token == scope.name) return true;
  if (scope.jobs.empty() || manifest.results().empty()) return false;
  return std::all_of(
      manifest.results().begin(), manifest.results().end(),
      [&](const v1::ProcessResult& r) { return ScopeListHas(scope.jobs, r.job_id()); });
}

}  // namespace gpuctl::daemon
