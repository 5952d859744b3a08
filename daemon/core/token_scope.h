#ifndef GPUCTL_DAEMON_CORE_TOKEN_SCOPE_H_
#define GPUCTL_DAEMON_CORE_TOKEN_SCOPE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gpuctl/v1/manifest.pb.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon {

// The label a process's Kubernetes namespace arrives as (the library
// reads POD_NAMESPACE).
inline constexpr absl::string_view kNamespaceLabel = "k8s.namespace";
// auth.tokens: at most this many; each list at most kMaxScopeEntries.
inline constexpr size_t kMaxScopedTokens = 64;
inline constexpr size_t kMaxScopeEntries = 64;

// What a scoped bearer token (auth.tokens) may trace and see. Every rule
// that is set must hold: the process's job is one of `jobs`, its
// k8s.namespace label one of `namespaces`, and it carries every pair of
// `labels`. Immutable after startup.
//
// Labels, namespaces included, are what the processes themselves announce:
// a scope keeps a token away from the processes that truthfully carry
// other values, which is what a shared node needs; a process that claims
// another team's namespace opts itself into that team's tracing.
struct TokenScope {
  std::string name;
  std::vector<std::string> jobs{};
  std::vector<std::string> namespaces{};
  std::vector<std::pair<std::string, std::string>> labels{};
};

// Checks a scope as configured: a name of 1-64 bytes of [A-Za-z0-9._-], at
// least one rule, job ids and labels valid as selectors take them, no list
// longer than kMaxScopeEntries. INVALID_ARGUMENT naming the problem.
absl::Status ValidateTokenScope(const TokenScope& scope);

// `token "ml" (jobs 42, 43; namespace ml-train; label team=vision)`.
std::string DescribeTokenScope(const TokenScope& scope);

// OK when every process `selector` can match is inside `scope`: the
// selector names one of the scope's jobs, one of its namespaces as its
// k8s.namespace label, and carries each of its labels (selector criteria
// are AND-ed, so that bounds every match). Else PERMISSION_DENIED naming the
// scope and what the selector lacks.
absl::Status CheckSelectorInScope(const TokenScope& scope, const v1::ProcessSelector& selector);

// Whether an attached process is inside `scope` (its job id and labels).
bool ProcessInScope(const TokenScope& scope, const v1::ProcessInfo& process);

// Whether a stored trace is inside `scope`: it has at least one process
// result and every result's job is one of the scope's jobs. A scope
// without a job rule sees only the traces its own token requested
// (`requested_by_token`, from the manifest), since stored results carry no
// labels.
bool ManifestInScope(const TokenScope& scope, const v1::TraceManifest& manifest,
                     absl::string_view requested_by_token);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_TOKEN_SCOPE_H_
