#include "daemon/core/token_scope.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;

TokenScope MlTeamScope() {
  return TokenScope{.name = "ml",
                    .jobs = {"42", "43"},
                    .namespaces = {"ml-train"},
                    .labels = {{"team", "vision"}}};
}

v1::ProcessSelector ScopeSelector(const std::string& job, const std::string& ns,
                                  const std::string& team) {
  v1::ProcessSelector s;
  s.set_job_id(job);
  if (!ns.empty()) (*s.mutable_labels())["k8s.namespace"] = ns;
  if (!team.empty()) (*s.mutable_labels())["team"] = team;
  return s;
}

TEST(TokenScopeTest, SelectorMustCarryEveryRuleOfTheScope) {
  const TokenScope scope = MlTeamScope();
  EXPECT_TRUE(CheckSelectorInScope(scope, ScopeSelector("43", "ml-train", "vision")).ok());
  v1::ProcessSelector narrower = ScopeSelector("42", "ml-train", "vision");
  narrower.add_pids(7);
  (*narrower.mutable_labels())["extra"] = "x";
  EXPECT_TRUE(CheckSelectorInScope(scope, narrower).ok());

  absl::Status no_job = CheckSelectorInScope(scope, ScopeSelector("", "ml-train", "vision"));
  EXPECT_EQ(no_job.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(no_job.message(), HasSubstr("token \"ml\" (jobs 42, 43; namespace ml-train; "
                                          "label team=vision)"));
  EXPECT_THAT(no_job.message(), HasSubstr("--job"));
  EXPECT_THAT(CheckSelectorInScope(scope, ScopeSelector("44", "ml-train", "vision")).message(),
              HasSubstr("job \"44\" is not one of its"));
  EXPECT_THAT(CheckSelectorInScope(scope, ScopeSelector("42", "other", "vision")).message(),
              HasSubstr("k8s.namespace"));
  EXPECT_THAT(CheckSelectorInScope(scope, ScopeSelector("42", "ml-train", "")).message(),
              HasSubstr("label team=vision"));
  // A pid alone could reach any process: refused.
  v1::ProcessSelector pids_only;
  pids_only.add_pids(1234);
  EXPECT_EQ(CheckSelectorInScope(scope, pids_only).code(), absl::StatusCode::kPermissionDenied);
}

TEST(TokenScopeTest, OnlyTheRulesThatAreSetApply) {
  TokenScope ns_only{.name = "ns", .namespaces = {"a", "b"}};
  EXPECT_TRUE(CheckSelectorInScope(ns_only, ScopeSelector("", "b", "")).ok());
  EXPECT_TRUE(CheckSelectorInScope(ns_only, ScopeSelector("any-job", "a", "")).ok());
  EXPECT_FALSE(CheckSelectorInScope(ns_only, ScopeSelector("any-job", "", "")).ok());
}

TEST(TokenScopeTest, ProcessesAreFilteredByJobNamespaceAndLabels) {
  const TokenScope scope = MlTeamScope();
  v1::ProcessInfo p;
  p.set_job_id("42");
  (*p.mutable_labels())["k8s.namespace"] = "ml-train";
  (*p.mutable_labels())["team"] = "vision";
  EXPECT_TRUE(ProcessInScope(scope, p));
  v1::ProcessInfo other_job = p;
  other_job.set_job_id("7");
  EXPECT_FALSE(ProcessInScope(scope, other_job));
  v1::ProcessInfo other_ns = p;
  (*other_ns.mutable_labels())["k8s.namespace"] = "prod";
  EXPECT_FALSE(ProcessInScope(scope, other_ns));
  v1::ProcessInfo no_team = p;
  no_team.mutable_labels()->erase("team");
  EXPECT_FALSE(ProcessInScope(scope, no_team));
}

TEST(TokenScopeTest, StoredTracesByEveryResultsJobOrTheRequestingToken) {
  const TokenScope scope = MlTeamScope();
  v1::TraceManifest m;
  m.add_results()->set_job_id("42");
  m.add_results()->set_job_id("43");
  EXPECT_TRUE(ManifestInScope(scope, m, ""));
  m.add_results()->set_job_id("7");
  EXPECT_FALSE(ManifestInScope(scope, m, ""));
  EXPECT_FALSE(ManifestInScope(scope, m, "someone-else"));
  EXPECT_TRUE(ManifestInScope(scope, m, "ml"));
  EXPECT_FALSE(ManifestInScope(scope, v1::TraceManifest(), ""));
  TokenScope labels_only{.name = "l", .labels = {{"team", "vision"}}};
  v1::TraceManifest ok;
  ok.add_results()->set_job_id("42");
  EXPECT_FALSE(ManifestInScope(labels_only, ok, ""));
  EXPECT_TRUE(ManifestInScope(labels_only, ok, "l"));
}

TEST(TokenScopeTest, ValidatesNamesRulesAndValues) {
  EXPECT_TRUE(ValidateTokenScope(MlTeamScope()).ok());
  EXPECT_THAT(ValidateTokenScope(TokenScope{.name = "", .jobs = {"1"}}).message(),
              HasSubstr("token name"));
  EXPECT_THAT(ValidateTokenScope(TokenScope{.name = "a b", .jobs = {"1"}}).message(),
              HasSubstr("token name"));
  EXPECT_THAT(ValidateTokenScope(TokenScope{.name = "x"}).message(), HasSubstr("auth.token_file"));
  EXPECT_FALSE(ValidateTokenScope(TokenScope{.name = "x", .jobs = {""}}).ok());
  EXPECT_FALSE(ValidateTokenScope(TokenScope{.name = "x", .jobs = {std::string(300, 'j')}}).ok());
  EXPECT_FALSE(ValidateTokenScope(TokenScope{.name = "x", .namespaces = {""}}).ok());
  EXPECT_FALSE(ValidateTokenScope(TokenScope{.name = "x", .labels = {{"bad key", "v"}}}).ok());
  TokenScope many{.name = "x"};
  many.jobs.assign(kMaxScopeEntries + 1, "j");
  EXPECT_FALSE(ValidateTokenScope(many).ok());
}

}  // namespace
}  // namespace gpuctl::daemon
