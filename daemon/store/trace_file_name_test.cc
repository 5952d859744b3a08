#include "daemon/store/trace_file_name.h"

#include <string>

#include "daemon/store/local_store.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

TEST(TraceFileNameTest, NamesHostRankAndPid) {
  EXPECT_EQ(TraceFileName("node1", 3, 4242), "node1-rank3-pid4242.json.gz");
  EXPECT_EQ(TraceFileName("node1", -1, 7), "node1-rank-1-pid7.json.gz");
}

TEST(TraceFileNameTest, HostIsReducedToSafeBytes) {
  EXPECT_EQ(TraceFileHost("a/b c_d"), "a-b-c-d");
  EXPECT_EQ(TraceFileHost(".hidden"), "-hidden");
  EXPECT_EQ(TraceFileHost(""), "unknown");
  EXPECT_EQ(TraceFileHost(std::string(300, 'h')).size(), 128u);
  for (const std::string& host : {std::string("../.."), std::string("x\n"), std::string(),
                                  std::string("."), std::string(200, '/')}) {
    EXPECT_TRUE(IsValidStoreFileName(TraceFileName(host, 0, 1))) << host;
  }
}

TEST(TraceFileNameTest, RecognisesOnlyTheHostsOwnFiles) {
  EXPECT_TRUE(IsTraceFileOfHost("node-rank0-pid7.json.gz", "node"));
  EXPECT_TRUE(IsTraceFileOfHost("node-rank-1-pid7.json.gz", "node"));
  EXPECT_TRUE(IsTraceFileOfHost(TraceFileName("a/b", 2, 9), "a/b"));
  EXPECT_FALSE(IsTraceFileOfHost("node-1-rank0-pid7.json.gz", "node"));
  EXPECT_FALSE(IsTraceFileOfHost("node-rank0-pid7.json", "node"));
  EXPECT_FALSE(IsTraceFileOfHost("node-rank0-pid-7.json.gz", "node"));
  EXPECT_FALSE(IsTraceFileOfHost("node-rankx-pid7.json.gz", "node"));
  EXPECT_FALSE(IsTraceFileOfHost("manifest.json", "node"));
}

}  // namespace
}  // namespace gpuctl::daemon
