#include "client_lib/src/labels.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>

namespace gpuctl::client {
namespace {

using V = std::vector<std::string>;
using P = std::vector<LabelPair>;

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(LabelsTest, ValidityFollowsTheIpcRules) {
  EXPECT_TRUE(IsValidLabel("app.kubernetes.io/name", "trainer"));
  EXPECT_TRUE(IsValidLabel("a_b-c", ""));
  EXPECT_TRUE(IsValidLabel("k", "say \"hi\" = ok, {}"));
  EXPECT_FALSE(IsValidLabel("", "v"));
  EXPECT_FALSE(IsValidLabel("bad key", "v"));
  EXPECT_FALSE(IsValidLabel("k=v", "v"));
  EXPECT_FALSE(IsValidLabel("k", "line\nbreak"));
  EXPECT_FALSE(IsValidLabel("k", "caf\xc3\xa9"));
  EXPECT_TRUE(IsValidLabel(std::string(253, 'k'), std::string(253, 'v')));
  EXPECT_FALSE(IsValidLabel(std::string(254, 'k'), "v"));
  EXPECT_FALSE(IsValidLabel("k", std::string(254, 'v')));
}

TEST(LabelsTest, ParsesCommaSeparatedPairs) {
  EXPECT_EQ(ParseLabelList("team=a,idx=0"), (P{{"team", "a"}, {"idx", "0"}}));
  EXPECT_EQ(ParseLabelList(" team = a , ,noequals,url=x=y,"), (P{{"team", "a"}, {"url", "x=y"}}));
  EXPECT_EQ(ParseLabelList(""), P{});
}

TEST(LabelsTest, ParsesTheDownwardApiFormat) {
  const std::string text =
      "app=\"trainer\"\n"
      "note=\"say \\\"hi\\\" \\\\ back\"\n"
      "tab=\"a\\tb\"\n"
      "hex=\"\\x41\\u0042\\U00000043\\104\"\n"
      "unquoted=value\n"
      "\n"
      "open=\"never closed\n"
      "inner=\"a\"b\"\n"
      "badescape=\"\\q\"\n"
      "cr=\"windows\"\r\n"
      "last=\"no newline\"";
  EXPECT_EQ(ParseDownwardApiLabels(text), (P{{"app", "trainer"},
                                             {"note", "say \"hi\" \\ back"},
                                             {"tab", "a\tb"},
                                             {"hex", "ABCD"},
                                             {"cr", "windows"},
                                             {"last", "no newline"}}));
  // A non-ASCII escape cannot pass validation.
  const P unicode = ParseDownwardApiLabels("k=\"\\u00e9\"");
  ASSERT_EQ(unicode.size(), 1u);
  EXPECT_FALSE(IsValidLabel(unicode[0].first, unicode[0].second));
}

TEST(LabelsTest, CollectsEverySourceWithPrecedenceAndSkipsBadEntries) {
  char path[] = "/tmp/gpuctl-labels-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string content = "app=\"trainer\"\nteam=\"from-file\"\nbad key=\"x\"\nnl=\"a\\nb\"\n";
  ASSERT_EQ(write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  close(fd);
  const V labels = CollectLabels(FakeEnv({{"GPUCTL_LABELS", "team=a,idx=4,=empty,sp ace=1"},
                                          {"GPUCTL_LABELS_FILE", path},
                                          {"POD_NAME", "trainer-4"},
                                          {"POD_NAMESPACE", "ml"},
                                          {"NODE_NAME", "gpu node"}}));
  EXPECT_EQ(labels, (V{"team=a", "idx=4", "app=trainer", "k8s.pod=trainer-4", "k8s.namespace=ml",
                       "k8s.node=gpu node"}));
  unlink(path);
}

TEST(LabelsTest, MissingFileAndNoVariablesMeanNoLabels) {
  EXPECT_EQ(CollectLabels(FakeEnv({})), V{});
  EXPECT_EQ(CollectLabels(FakeEnv({{"GPUCTL_LABELS_FILE", "/nonexistent/labels"}})), V{});
}

TEST(LabelsTest, KeepsAtMost64PairsAndAKeyOnce) {
  std::string list;
  for (int i = 0; i < 100; ++i) list += "k" + std::to_string(i) + "=v,";
  list += "k0=again";
  const V labels = CollectLabels(FakeEnv({{"GPUCTL_LABELS", list}, {"POD_NAME", "p"}}));
  ASSERT_EQ(labels.size(), kMaxLabels);
  EXPECT_EQ(labels.front(), "k0=v");
  EXPECT_EQ(labels.back(), "k63=v");
}

}  // namespace
}  // namespace gpuctl::client
