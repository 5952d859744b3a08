// Replays test/fuzz_corpus/trace_names and seeded mutations of it through the
// trace-name target (trace_names_fuzz_target.cc), whose invariants abort on
// violation, and checks the seeds mean what their names say.
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "daemon/common/testing/fuzz_corpus_replay.h"
#include "daemon/common/trace_id.h"
#include "daemon/s3/trace_object_key.h"
#include "daemon/store/local_store.h"
#include "gpuctl/v1/trace_layout.h"
#include "gtest/gtest.h"

namespace gpuctl::s3 {
namespace {

std::string Seed(const std::string& name) {
  std::ifstream in(std::string(GPUCTL_TRACE_NAMES_CORPUS_DIR) + "/" + name, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(TraceNamesFuzzTest, SeedsAreWhatTheirNamesSay) {
  EXPECT_TRUE(IsValidTraceId(Seed("trace_id")));
  EXPECT_FALSE(IsValidTraceId(Seed("trace_id_upper")));
  EXPECT_FALSE(IsValidTraceId(Seed("trace_id_v4")));
  EXPECT_TRUE(daemon::IsValidStoreFileName(Seed("file_name")));
  EXPECT_FALSE(daemon::IsValidStoreFileName(Seed("file_dotdot")));
  EXPECT_FALSE(daemon::IsValidStoreFileName(Seed("file_hidden")));
  EXPECT_TRUE(ParseTraceObjectKey("", Seed("key_no_prefix")).has_value());
  const std::string with_prefix = Seed("key_prefix");
  const size_t newline = with_prefix.find('\n');
  ASSERT_NE(newline, std::string::npos);
  EXPECT_TRUE(ParseTraceObjectKey(with_prefix.substr(0, newline), with_prefix.substr(newline + 1))
                  .has_value());
  // A host's manifest: a valid key's file, never a store file name.
  EXPECT_FALSE(daemon::IsValidStoreFileName(Seed("file_manifest_path")));
  EXPECT_TRUE(layout::IsTraceFilePath(Seed("file_manifest_path")));
  EXPECT_FALSE(layout::IsTraceFilePath(Seed("file_manifest_nested")));
  const std::string host_manifest = Seed("key_host_manifest");
  const size_t manifest_newline = host_manifest.find('\n');
  ASSERT_NE(manifest_newline, std::string::npos);
  auto parsed = ParseTraceObjectKey(host_manifest.substr(0, manifest_newline),
                                    host_manifest.substr(manifest_newline + 1));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->file, "_gpuctl/node-1.json");
  const std::string wrong_day = Seed("key_wrong_day");
  EXPECT_FALSE(ParseTraceObjectKey("traces", wrong_day.substr(wrong_day.find('\n') + 1)));
}

TEST(TraceNamesFuzzTest, CorpusAndMutationsHoldInvariants) {
  const std::vector<std::string> corpus =
      testing::LoadFuzzCorpus(std::string(GPUCTL_TRACE_NAMES_CORPUS_DIR));
  ASSERT_GE(corpus.size(), 8u);
  for (const std::string& input : corpus) EXPECT_EQ(testing::RunFuzzInput(input), 0);
  std::mt19937_64 rng(11);
  int valid_ids = 0;
  for (int i = 0; i < 50000; ++i) {
    const std::string input = testing::MutateFuzzInput(corpus, rng);
    ASSERT_EQ(testing::RunFuzzInput(input), 0);
    valid_ids += IsValidTraceId(input);
  }
  // Mutations that keep an id valid (a changed random digit) reach the
  // accepting paths too.
  EXPECT_GT(valid_ids, 0);
}

}  // namespace
}  // namespace gpuctl::s3
