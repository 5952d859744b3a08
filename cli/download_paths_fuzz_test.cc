// Replays test/fuzz_corpus/download_paths and seeded mutations of it through
// the download-path target (download_paths_fuzz_target.cc), whose invariants
// abort on violation, and pins the cases it found.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cli/download.h"
#include "cli/download_paths.h"
#include "cli/fake_gpuctl_service_test_util.h"
#include "cli/format.h"
#include "cli/trace_download.h"
#include "daemon/common/testing/fuzz_corpus_replay.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"

namespace gpuctl::cli {
namespace {

namespace fs = std::filesystem;
using ::gpuctl::cli::testing::FakeServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(DownloadPathsFuzzTest, CorpusAndMutationsHoldInvariants) {
  const std::vector<std::string> corpus =
      gpuctl::testing::LoadFuzzCorpus(GPUCTL_DOWNLOAD_PATHS_CORPUS_DIR);
  ASSERT_GE(corpus.size(), 10u);
  for (const std::string& input : corpus) EXPECT_EQ(gpuctl::testing::RunFuzzInput(input), 0);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 30000; ++i) {
    ASSERT_EQ(gpuctl::testing::RunFuzzInput(gpuctl::testing::MutateFuzzInput(corpus, rng)), 0);
  }
}

TEST(DownloadPathsTest, HostileTraceIdsAreRefused) {
  for (const std::string& id :
       {std::string(""), std::string("."), std::string(".."), std::string("../x"),
        std::string("/etc"), std::string("a/b"), std::string("a\0b", 3), std::string(256, 'a'),
        std::string("caf\xc3\xa9"), std::string("\xe2\x80\xae"), std::string("a\\b")}) {
    EXPECT_FALSE(TraceDirectory("out", id).ok()) << Printable(id);
  }
  EXPECT_FALSE(TraceDirectory("", "T1").ok());
  EXPECT_EQ(*TraceDirectory("out", "T1"), "out/T1");
  EXPECT_EQ(*TraceDirectory("/", "T1"), "/T1");
  EXPECT_EQ(*TraceDirectory("out/", std::string(255, 'a')), "out/" + std::string(255, 'a'));
}

// The temporary of a file with the longest safe name used to be 263 bytes
// long, which no file system accepts: the download failed.
TEST(DownloadPathsTest, TemporaryOfTheLongestNameIsCreatable) {
  std::string tmpl = (fs::temp_directory_path() / "gpuctl-paths-test-XXXXXX").string();
  const std::string dir = mkdtemp(tmpl.data());
  const std::string name(255, 'n');
  absl::StatusOr<std::string> temp = TemporaryFileTemplate(dir, name);
  ASSERT_TRUE(temp.ok()) << temp.status();
  EXPECT_EQ(fs::path(*temp).parent_path(), fs::path(dir));
  EXPECT_EQ(fs::path(*temp).filename().string().size(), 255u);
  EXPECT_EQ(fs::path(*temp).filename().string().front(), '.');
  const int fd = mkstemp(temp->data());
  EXPECT_GE(fd, 0) << *temp;
  if (fd >= 0) close(fd);
  EXPECT_FALSE(TemporaryFileTemplate(dir, "../x").ok());
  EXPECT_FALSE(SavedFilePath(dir, ".hidden").ok());
  fs::remove_all(dir);
}

TEST(DownloadPathsTest, DownloadsAFileWithTheLongestSafeName) {
  FakeServer server;
  const std::string name(255, 'n');
  server.service().get_trace = [name](const v1::GetTraceRequest&,
                                      grpc::ServerWriter<v1::TraceChunk>* writer) {
    v1::TraceChunk chunk;
    chunk.set_file(name);
    chunk.set_data("data");
    chunk.set_file_size(4);
    writer->Write(chunk);
    return grpc::Status::OK;
  };
  auto stub =
      v1::Gpuctl::NewStub(grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()));
  std::string tmpl = (fs::temp_directory_path() / "gpuctl-paths-test-XXXXXX").string();
  const std::string root = mkdtemp(tmpl.data());
  DownloadOptions options;
  options.trace_id = "T1";
  options.output_root = root;
  absl::StatusOr<DownloadResult> result = DownloadTrace(*stub, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(fs::is_regular_file(fs::path(root) / "T1" / name));
  fs::remove_all(root);
}

HostTrace Host(const std::string& target, const std::string& name,
               const std::vector<std::string>& files) {
  HostTrace host;
  host.target = target;
  host.started.emplace().set_host(name);
  int32_t pid = 100;
  for (const std::string& file : files) host.results[pid++].set_file(file);
  return host;
}

// Two processes of one host naming the same file used to put it in the
// request twice: the daemon sent it twice and the download failed.
TEST(DownloadPathsTest, AFileTwoProcessesNameIsRequestedOnce) {
  std::vector<std::optional<DownloadPlan>> plans = PlanDownloads(
      {Host("a:1", "a", {"x.json.gz", "x.json.gz"}), Host("b:1", "b", {"y.json.gz"})});
  ASSERT_TRUE(plans[0].has_value());
  EXPECT_EQ(plans[0]->error, "");
  EXPECT_THAT(plans[0]->files, ElementsAre("manifest.json", "x.json.gz"));
  EXPECT_FALSE(plans[0]->local_names.contains("x.json.gz"));
}

TEST(DownloadPathsTest, AnUnsafeFileNameIsReportedAsUnsafe) {
  std::vector<std::optional<DownloadPlan>> plans =
      PlanDownloads({Host("a:1", "a", {"../../etc/passwd"}), Host("b:1", "b", {"y"})});
  ASSERT_TRUE(plans[0].has_value());
  EXPECT_THAT(plans[0]->error, HasSubstr("unsafe file name"));
  EXPECT_EQ(plans[1]->error, "");
}

TEST(DownloadPathsTest, HostileHostNamesBecomeSafePrefixes) {
  std::vector<std::optional<DownloadPlan>> plans =
      PlanDownloads({Host("h1:7", "../..", {"f"}), Host("h2:7", std::string("a\0b", 3), {"f"}),
                     Host("h3:7", std::string(300, 'x'), {"f"}), Host("h4:7", "..", {"f"})});
  std::set<std::string> saved;
  for (const auto& plan : plans) {
    ASSERT_TRUE(plan.has_value());
    ASSERT_EQ(plan->error, "");
    for (const std::string& file : plan->files) {
      auto it = plan->local_names.find(file);
      const std::string local = it == plan->local_names.end() ? file : it->second;
      EXPECT_TRUE(IsSafeTracePath(local)) << Printable(local);
      EXPECT_TRUE(saved.insert(local).second) << local;
    }
  }
  EXPECT_TRUE(saved.contains("_gpuctl/h1_7.json"));
}

}  // namespace
}  // namespace gpuctl::cli
