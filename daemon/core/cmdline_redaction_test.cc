#include "daemon/core/cmdline_redaction.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using Args = std::vector<std::string>;

struct RedactionCase {
  Args in;
  Args want;
};

TEST(CmdlineRedactionTest, RedactsCredentialsAndKeepsEverythingElse) {
  const RedactionCase kCases[] = {
      // Flags with the value after '='.
      {{"train.py", "--password=hunter2"}, {"train.py", "--password=***"}},
      {{"--db-password=x", "--PASSWORD=y"}, {"--db-password=***", "--PASSWORD=***"}},
      {{"--secret=a", "--secret-file=b", "--secrets=c"},
       {"--secret=***", "--secret-file=***", "--secrets=***"}},
      {{"--api-key=k", "--api_key=k", "--apikey=k"},
       {"--api-key=***", "--api_key=***", "--apikey=***"}},
      {{"--access-key=AKIA", "--aws-secret-access-key=s"},
       {"--access-key=***", "--aws-secret-access-key=***"}},
      {{"-token=t", "--hf-token=t", "--authtoken=t"},
       {"-token=***", "--hf-token=***", "--authtoken=***"}},
      {{"--credentials=c", "--private-key=p"}, {"--credentials=***", "--private-key=***"}},
      // The value in the next argument.
      {{"python", "--token", "abc", "--steps", "5"}, {"python", "--token", "***", "--steps", "5"}},
      {{"--api-key", "k1", "--password", "p"}, {"--api-key", "***", "--password", "***"}},
      // ...unless that is another flag (a boolean credential switch).
      {{"--use-token", "--verbose"}, {"--use-token", "--verbose"}},
      {{"--password"}, {"--password"}},
      // NAME=value.
      {{"env", "AWS_SECRET_ACCESS_KEY=abc", "HF_TOKEN=t", "db_password=p"},
       {"env", "AWS_SECRET_ACCESS_KEY=***", "HF_TOKEN=***", "db_password=***"}},
      {{"MY_CREDENTIAL=c", "ApiKey=k"}, {"MY_CREDENTIAL=***", "ApiKey=***"}},
      {{"--env=API_KEY=k", "--env=MODE=fast"}, {"--env=API_KEY=***", "--env=MODE=fast"}},
      // URLs with a password.
      {{"--db=postgres://alice:s3cret@db:5432/x"}, {"--db=postgres://alice:***@db:5432/x"}},
      {{"https://u:p@h/a?b=c", "https://u@h/", "s3://bucket/k:v@x"},
       {"https://u:***@h/a?b=c", "https://u@h/", "s3://bucket/k:v@x"}},
      {{"a=http://x:y@h,b=ftp://m:n@g"}, {"a=http://x:***@h,b=ftp://m:***@g"}},
  };
  for (const RedactionCase& c : kCases) {
    EXPECT_EQ(RedactCommandLine(c.in), c.want) << ::testing::PrintToString(c.in);
  }
}

TEST(CmdlineRedactionTest, LeavesLookAlikesAlone) {
  const Args kKept[] = {
      {"python", "train.py", "--keyboard", "us", "--steps=5"},
      {"--max-tokens=512", "--tokenizer", "gpt2", "--num_tokens", "8"},
      {"--sort-key=name", "--key-columns", "a,b", "--monkey=1"},
      {"--batch-size=32", "--lr=0.1", "--", "--password-free"},
      {"KEYBOARD", "MODE=fast", "1=KEY", "a b=c"},
      {"https://example.com/path", "user@host:/dir", "mailto:a@b"},
      {"-", "-p", "x"},
      {},
  };
  for (const Args& args : kKept) {
    EXPECT_EQ(RedactCommandLine(args), args) << ::testing::PrintToString(args);
  }
}

TEST(CmdlineRedactionTest, RedactsEveryOccurrenceAndNothingElse) {
  Args in = {"torchrun", "--nproc=8", "train.py",  "--wandb-api-key", "K",
             "--seed",   "1",         "--token=T", "--out",           "/tmp/x"};
  Args out = RedactCommandLine(in);
  EXPECT_THAT(out, ::testing::ElementsAre("torchrun", "--nproc=8", "train.py", "--wandb-api-key",
                                          "***", "--seed", "1", "--token=***", "--out", "/tmp/x"));
  for (const std::string& arg : out) {
    EXPECT_EQ(arg.find('K'), std::string::npos);
    EXPECT_EQ(arg.find('T'), std::string::npos);
  }
}

}  // namespace
}  // namespace gpuctl::daemon
