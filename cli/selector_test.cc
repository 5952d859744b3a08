#include "cli/selector.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::cli {
namespace {

using ::testing::HasSubstr;

std::string Ranges(const std::vector<v1::RankRange>& ranges) {
  google::protobuf::RepeatedPtrField<v1::RankRange> field(ranges.begin(), ranges.end());
  return RankSetText(field);
}

TEST(CliRankSetTest, ParsesRanksAndRanges) {
  absl::StatusOr<std::vector<v1::RankRange>> set = ParseRankSet("0-3,8,10-10,2147483647");
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->size(), 4u);
  EXPECT_EQ((*set)[0].first(), 0);
  EXPECT_EQ((*set)[0].last(), 3);
  EXPECT_EQ((*set)[1].first(), 8);
  EXPECT_EQ((*set)[1].last(), 8);
  EXPECT_EQ((*set)[3].first(), 2147483647);
  EXPECT_EQ(Ranges(*set), "0-3,8,10,2147483647");
}

TEST(CliRankSetTest, ErrorsNameTheBadPart) {
  struct Case {
    const char* text;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"", "empty rank set"},
           {"0-3,x", "\"x\" is not a rank"},
           {"0-3,,8", "\"\" is empty"},
           {"0,", "\"\" is empty"},
           {"5-2", "\"5-2\" ends before it starts"},
           {"-1", "\"-1\" is not a rank range"},
           {"1-", "\"1-\" is not a rank range"},
           {"1-2-3", "\"1-2-3\" is not a rank range"},
           {"+1", "\"+1\" is not a rank"},
           {" 1", "\" 1\" is not a rank"},
           {"2147483648", "\"2147483648\" is not a rank"},
           {"0x10", "\"0x10\" is not a rank"},
       }) {
    absl::StatusOr<std::vector<v1::RankRange>> set = ParseRankSet(c.text);
    ASSERT_FALSE(set.ok()) << c.text;
    EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(set.status().message(), HasSubstr(absl::StrCat("--rank \"", c.text, "\"")));
    EXPECT_THAT(set.status().message(), HasSubstr(c.message)) << c.text;
    EXPECT_THAT(set.status().message(), HasSubstr("e.g. 0-3,8"));
  }
}

TEST(CliRankSetTest, MergesOverlappingAndAdjacentRanges) {
  std::vector<v1::RankRange> ranges = *ParseRankSet("8,2-5,0-3,6,10-12,11,2147483647");
  EXPECT_EQ(Ranges(MergeRankRanges(ranges)), "0-6,8,10-12,2147483647");
}

TEST(CliSelectorTest, BuildsEveryCriterion) {
  SelectorFlags flags;
  flags.job_id = "42";
  flags.pids = {"7", "8"};
  flags.rank_sets = {"4-7", "0-3,9"};
  flags.labels = {"team=nlp", "k8s.pod=train-0", "empty=", "team=nlp"};
  flags.limit = "3";
  flags.include_helpers = true;
  absl::StatusOr<v1::ProcessSelector> s = BuildSelector(flags);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->job_id(), "42");
  EXPECT_THAT(s->pids(), ::testing::ElementsAre(7, 8));
  EXPECT_EQ(RankSetText(s->ranks()), "0-7,9");
  EXPECT_EQ(s->labels().size(), 3u);
  EXPECT_EQ(s->labels().at("k8s.pod"), "train-0");
  EXPECT_EQ(s->labels().at("empty"), "");
  EXPECT_EQ(s->limit(), 3u);
  EXPECT_TRUE(s->include_helpers());
  EXPECT_TRUE(HasCriterion(*s));
  EXPECT_EQ(DescribeSelector(*s),
            "job \"42\" and pids 7,8 and ranks 0-7,9 and label empty= and label k8s.pod=train-0 "
            "and label team=nlp, at most 3 per host, helpers included");
}

TEST(CliSelectorTest, AllJobsAsksForEveryJobAPidReaches) {
  SelectorFlags flags;
  flags.pids = {"50"};
  absl::StatusOr<v1::ProcessSelector> plain = BuildSelector(flags);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->allow_multiple_jobs());
  flags.all_jobs = true;
  absl::StatusOr<v1::ProcessSelector> all = BuildSelector(flags);
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->allow_multiple_jobs());
  EXPECT_EQ(DescribeSelector(*all), "pid 50, of every job");
  SelectorFlags without_pid;
  without_pid.job_id = "42";
  without_pid.all_jobs = true;
  EXPECT_EQ(BuildSelector(without_pid).status().message(),
            "--all-jobs: applies to --pid (a pid whose descendants belong to several jobs)");
}

TEST(CliSelectorTest, LimitAndHelpersAloneAreNoCriterion) {
  SelectorFlags flags;
  flags.limit = "2";
  flags.include_helpers = true;
  absl::StatusOr<v1::ProcessSelector> s = BuildSelector(flags);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(HasCriterion(*s));
  SelectorFlags rank;
  rank.rank_sets = {"0"};
  EXPECT_TRUE(HasCriterion(*BuildSelector(rank)));
  EXPECT_EQ(DescribeSelector(*BuildSelector(rank)), "rank 0");
}

TEST(CliSelectorTest, RefusesBadLabelsAndTooMuch) {
  struct Case {
    std::vector<std::string> labels;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {{"team"}, "expected KEY=VALUE"},
           {{"=nlp"}, "the key must be"},
           {{"te am=nlp"}, "the key must be"},
           {{std::string(254, 'k') + "=v"}, "the key must be 1-253"},
           {{"team=n\x01p"}, "printable ASCII"},
           {{"team=" + std::string(254, 'v')}, "at most 253"},
           {{"team=a", "team=b"}, "given twice with different values"},
       }) {
    SelectorFlags flags;
    flags.labels = c.labels;
    absl::StatusOr<v1::ProcessSelector> s = BuildSelector(flags);
    ASSERT_FALSE(s.ok()) << c.labels[0];
    EXPECT_THAT(s.status().message(), HasSubstr("--label"));
    EXPECT_THAT(s.status().message(), HasSubstr(c.message));
  }
  SelectorFlags many;
  for (int i = 0; i < 65; ++i) many.labels.push_back(absl::StrCat("k", i, "=v"));
  EXPECT_THAT(BuildSelector(many).status().message(), HasSubstr("at most 64 labels"));

  SelectorFlags ranges;
  std::string set;
  for (int i = 0; i < 1025; ++i) absl::StrAppend(&set, i == 0 ? "" : ",", 2 * i);
  ranges.rank_sets = {set};
  EXPECT_THAT(BuildSelector(ranges).status().message(), HasSubstr("at most 1024"));
  // The same count of ranks, merged into one range, is fine.
  std::string contiguous;
  for (int i = 0; i < 1025; ++i) absl::StrAppend(&contiguous, i == 0 ? "" : ",", i);
  ranges.rank_sets = {contiguous};
  EXPECT_TRUE(BuildSelector(ranges).ok());

  SelectorFlags pids;
  pids.pids.assign(4097, "5");
  EXPECT_THAT(BuildSelector(pids).status().message(), HasSubstr("at most 4096 pids"));
  for (const char* bad : {"0", "abc", "-3", "+3", " 3", "3.0", "0x10", "2147483648", ""}) {
    pids.pids = {bad};
    EXPECT_EQ(BuildSelector(pids).status().message(),
              absl::StrCat("--pid: expected a process id, a positive integer, got \"", bad, "\""));
  }
  SelectorFlags limit;
  limit.limit = "x";
  EXPECT_EQ(BuildSelector(limit).status().message(),
            "--limit: expected a number of processes per host (0: no limit), an integer, 0 or "
            "more, got \"x\"");
}

}  // namespace
}  // namespace gpuctl::cli
