#include "daemon/core/selector.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;

v1::ProcessSelector WithRanks(std::initializer_list<std::pair<int, int>> ranges) {
  v1::ProcessSelector s;
  for (auto [first, last] : ranges) {
    v1::RankRange* r = s.add_ranks();
    r->set_first(first);
    r->set_last(last);
  }
  return s;
}

TEST(SelectorTest, DescribesEveryCriterion) {
  v1::ProcessSelector s = WithRanks({{0, 3}, {8, 8}});
  s.set_job_id("42");
  (*s.mutable_labels())["team"] = "ml";
  EXPECT_EQ(DescribeSelector(s), "job \"42\" and ranks 0-3,8 and label team=ml");
  (*s.mutable_labels())["zone"] = "a";
  s.add_pids(7);
  EXPECT_EQ(DescribeSelector(s),
            "job \"42\" and pids [7] and ranks 0-3,8 and labels team=ml,zone=a");
  EXPECT_EQ(DescribeSelector(WithRanks({{5, 5}})), "rank 5");
  EXPECT_EQ(DescribeSelector(WithRanks({{5, 6}})), "ranks 5-6");
  s = WithRanks({{0, 7}});
  s.set_limit(4);
  s.set_include_helpers(true);
  EXPECT_EQ(DescribeSelector(s), "ranks 0-7, launchers and helpers included, at most 4");
  EXPECT_EQ(DescribeSelector({}), "any process");
}

TEST(SelectorTest, CriteriaAreJobPidsRanksOrLabels) {
  v1::ProcessSelector s;
  EXPECT_FALSE(HasCriterion(s));
  s.set_limit(3);
  s.set_include_helpers(true);
  EXPECT_FALSE(HasCriterion(s)) << "limit and include_helpers select nothing by themselves";
  EXPECT_TRUE(HasCriterion(WithRanks({{0, 0}})));
  v1::ProcessSelector labels;
  (*labels.mutable_labels())["a"] = "b";
  EXPECT_TRUE(HasCriterion(labels));
}

TEST(SelectorTest, ValidatesRankRanges) {
  EXPECT_TRUE(ValidateSelector(WithRanks({{0, 0}, {3, 9}, {2147483647, 2147483647}})).ok());
  absl::Status st = ValidateSelector(WithRanks({{0, 1}, {3, 1}}));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "rank range 3-1 is empty: its first rank exceeds its last");
  st = ValidateSelector(WithRanks({{-1, 2}}));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "rank range -1-2 has a negative rank");
  v1::ProcessSelector many;
  for (int i = 0; i < 1024; ++i) many.add_ranks()->set_last(i);
  EXPECT_TRUE(ValidateSelector(many).ok());
  many.add_ranks();
  EXPECT_EQ(ValidateSelector(many).message(), "1025 rank ranges, more than 1024");
}

TEST(SelectorTest, ValidatesPidsAndJob) {
  v1::ProcessSelector s;
  s.add_pids(0);
  EXPECT_EQ(ValidateSelector(s).message(), "invalid pid 0");
  s.clear_pids();
  for (int i = 1; i <= 4097; ++i) s.add_pids(i);
  EXPECT_EQ(ValidateSelector(s).message(), "4097 pids, more than 4096");
  s.clear_pids();
  s.set_job_id(std::string(257, 'j'));
  EXPECT_THAT(ValidateSelector(s).message(), HasSubstr("longer than 256"));
}

TEST(SelectorTest, ValidatesLabels) {
  auto check = [](const std::string& key, const std::string& value) {
    v1::ProcessSelector s;
    (*s.mutable_labels())[key] = value;
    return ValidateSelector(s);
  };
  EXPECT_TRUE(check("app.kubernetes.io/name", "trainer").ok());
  EXPECT_TRUE(check("k", "").ok()) << "an empty value is a value";
  EXPECT_TRUE(check(std::string(253, 'k'), std::string(253, 'v')).ok());
  EXPECT_THAT(check("", "x").message(), HasSubstr("must be 1 to 253 bytes"));
  EXPECT_THAT(check(std::string(254, 'k'), "x").message(), HasSubstr("must be 1 to 253 bytes"));
  absl::Status st = check("team name", "x");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "selector label key \"team name\" may hold only letters, digits and . _ / -");
  EXPECT_THAT(check("k", std::string(254, 'v')).message(), HasSubstr("254 bytes, more than 253"));
  EXPECT_EQ(check("k", "a\nb").message(),
            "selector label k has a value \"a\\x0ab\" that is not printable ASCII");
  EXPECT_THAT(check("k", "caf\xc3\xa9").message(), HasSubstr("not printable ASCII"));
  v1::ProcessSelector s;
  for (int i = 0; i < 65; ++i) (*s.mutable_labels())["k" + std::to_string(i)] = "v";
  EXPECT_EQ(ValidateSelector(s).message(), "65 labels, more than 64");
}

}  // namespace
}  // namespace gpuctl::daemon
