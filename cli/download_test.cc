#include "cli/download.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "cli/connection.h"
#include "cli/fake_gpuctl_service_test_util.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"

namespace gpuctl::cli {
namespace {

namespace fs = std::filesystem;
using ::gpuctl::cli::testing::FakeServer;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(CliIsSafeNameTest, Table) {
  for (const char* ok : {"a", "manifest.json", "node-1_rank0-pid12.json.gz", "T.1", "a..b"}) {
    EXPECT_TRUE(IsSafeName(ok)) << ok;
  }
  for (const char* bad : {"", ".", "..", ".hidden", "../x", "a/b", "/abs", "a\\b", "a b", "a\nb",
                          "caf\xc3\xa9", "a:b", "a*"}) {
    EXPECT_FALSE(IsSafeName(bad)) << bad;
  }
  EXPECT_TRUE(IsSafeName(std::string(255, 'a')));
  EXPECT_FALSE(IsSafeName(std::string(256, 'a')));
  EXPECT_FALSE(IsSafeName(std::string("a\0b", 3)));
}

v1::TraceChunk Chunk(std::string file, uint64_t offset, std::string data, uint64_t size) {
  v1::TraceChunk c;
  c.set_file(std::move(file));
  c.set_offset(offset);
  c.set_data(std::move(data));
  c.set_file_size(size);
  return c;
}

class CliDownloadTest : public ::testing::Test {
 protected:
  CliDownloadTest() {
    std::string tmpl = (fs::temp_directory_path() / "gpuctl-dl-test-XXXXXX").string();
    root_ = mkdtemp(tmpl.data());
    stub_ = v1::Gpuctl::NewStub(
        grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials()));
    // Set once, before any call: a download that fails returns before the
    // server's handler has ended, and replacing the handler then would free
    // it while it runs. Each call keeps the script it started with.
    server_.service().get_trace = [this](const v1::GetTraceRequest&,
                                         grpc::ServerWriter<v1::TraceChunk>* writer) {
      std::shared_ptr<const Script> script;
      {
        absl::MutexLock lock(&script_mu_);
        script = script_;
      }
      if (script == nullptr) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no script");
      for (const auto& c : script->chunks) writer->Write(c);
      return script->end;
    };
  }
  ~CliDownloadTest() override { fs::remove_all(root_); }

  // Makes the fake send exactly `chunks`.
  void Send(std::vector<v1::TraceChunk> chunks, grpc::Status end = grpc::Status::OK) {
    auto script = std::make_shared<const Script>(Script{std::move(chunks), std::move(end)});
    absl::MutexLock lock(&script_mu_);
    script_ = std::move(script);
  }
  absl::StatusOr<DownloadResult> Download(std::vector<std::string> files = {}) {
    DownloadOptions options;
    options.trace_id = "T1";
    options.files = std::move(files);
    options.output_root = root_;
    return DownloadTrace(*stub_, options);
  }
  std::vector<std::string> Listing() {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(fs::path(root_) / "T1")) {
      names.push_back(e.path().filename());
    }
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string Read(const std::string& name) {
    std::ifstream in(fs::path(root_) / "T1" / name, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  struct Script {
    std::vector<v1::TraceChunk> chunks;
    grpc::Status end;
  };
  // Before server_: a call still in flight when the test ends uses them
  // until the server's shutdown has waited for it.
  absl::Mutex script_mu_;
  std::shared_ptr<const Script> script_ ABSL_GUARDED_BY(script_mu_);
  FakeServer server_;
  std::unique_ptr<v1::Gpuctl::Stub> stub_;
  std::string root_;
};

TEST(CliIsSafeTracePathTest, OnlyAManifestMayNameTheOneSubdirectory) {
  for (const char* ok : {"a.json.gz", "manifest.json", "_gpuctl/node-1.json", "_gpuctl/a_b.json"}) {
    EXPECT_TRUE(IsSafeTracePath(ok)) << ok;
  }
  for (const char* bad : {"_gpuctl", "_gpuctl/", "_gpuctl/.json", "_gpuctl/.x.json", "_gpuctl/x",
                          "_gpuctl/x.json.gz", "_gpuctl/a/b.json", "_gpuctl/../x.json",
                          "other/x.json", "/_gpuctl/x.json", "_gpuctl//x.json"}) {
    EXPECT_FALSE(IsSafeTracePath(bad)) << bad;
  }
  absl::StatusOr<SaveLocation> where = LocateSavedFile("out/T1", "_gpuctl/node-1.json");
  ASSERT_TRUE(where.ok());
  EXPECT_EQ(where->directory, "out/T1/_gpuctl");
  EXPECT_EQ(where->name, "node-1.json");
}

TEST_F(CliDownloadTest, AManifestIsSavedUnderGpuctlWhereHtaDoesNotReadIt) {
  Send({Chunk("_gpuctl/node-1.json", 0, "{}", 2), Chunk("node-1-rank0-pid7.json.gz", 0, "z", 1)});
  auto result = Download();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Listing(), ::testing::ElementsAre("_gpuctl", "node-1-rank0-pid7.json.gz"));
  EXPECT_EQ(Read("_gpuctl/node-1.json"), "{}");
  ASSERT_EQ(result->files.size(), 2u);
  EXPECT_EQ(result->files[0].name, "_gpuctl/node-1.json");

  Send({Chunk("_gpuctl/../../escape.json", 0, "{}", 2)});
  result = Download();
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("unsafe file name"));
  EXPECT_FALSE(fs::exists(fs::path(root_) / "escape.json"));
}

TEST_F(CliDownloadTest, InterleavedChunksAndEmptyFile) {
  Send({Chunk("a", 0, "he", 5), Chunk("empty", 0, "", 0), Chunk("b", 0, "x", 1),
        Chunk("a", 2, "llo", 5)});
  absl::StatusOr<DownloadResult> result = Download();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->directory, (fs::path(root_) / "T1").string());
  ASSERT_EQ(result->files.size(), 3u);
  EXPECT_EQ(Read("a"), "hello");
  EXPECT_EQ(Read("b"), "x");
  EXPECT_EQ(Read("empty"), "");
  EXPECT_EQ(Listing(), (std::vector<std::string>{"a", "b", "empty"}));
  EXPECT_EQ(fs::status(fs::path(root_) / "T1" / "a").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
}

TEST_F(CliDownloadTest, ReplacesAnExistingFile) {
  fs::create_directories(fs::path(root_) / "T1");
  std::ofstream(fs::path(root_) / "T1" / "a") << "old contents";
  Send({Chunk("a", 0, "new", 3)});
  ASSERT_TRUE(Download().ok());
  EXPECT_EQ(Read("a"), "new");
}

TEST_F(CliDownloadTest, RefusesBrokenStreams) {
  struct Case {
    const char* name;
    std::vector<v1::TraceChunk> chunks;
    const char* message;
    std::vector<std::string> left = {};
  };
  std::vector<Case> cases = {
      {"gap", {Chunk("a", 0, "ab", 5), Chunk("a", 3, "de", 5)}, "out of order"},
      {"overlap", {Chunk("a", 0, "ab", 5), Chunk("a", 1, "bc", 5)}, "out of order"},
      {"overflow", {Chunk("a", 0, "abcdef", 5)}, "more data than the announced size"},
      {"size change", {Chunk("a", 0, "ab", 5), Chunk("a", 2, "c", 3)}, "size changed"},
      {"truncated", {Chunk("a", 0, "ab", 5)}, "after 2 of 5 bytes"},
      // The first copy was complete and stays.
      {"twice", {Chunk("a", 0, "a", 1), Chunk("a", 0, "a", 1)}, "sent twice", {"a"}},
      {"traversal", {Chunk("../a", 0, "a", 1)}, "unsafe file name"},
      {"nothing", {}, "sent no file"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    fs::remove_all(fs::path(root_) / "T1");
    Send(c.chunks);
    absl::StatusOr<DownloadResult> result = Download();
    ASSERT_FALSE(result.ok());
    EXPECT_FALSE(IsRpcError(result.status()));
    EXPECT_THAT(result.status().message(), HasSubstr(c.message));
    EXPECT_EQ(Listing(), c.left);  // no half file, no temporary
  }
}

TEST_F(CliDownloadTest, RequestedFilesOnly) {
  Send({Chunk("b", 0, "b", 1)});
  absl::StatusOr<DownloadResult> result = Download({"a"});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("not requested"));

  Send({Chunk("a", 0, "a", 1)});
  result = Download({"a", "manifest.json"});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("did not send \"manifest.json\""));
}

TEST_F(CliDownloadTest, DaemonErrorIsMarked) {
  Send({Chunk("a", 0, "ab", 5)}, grpc::Status(grpc::StatusCode::INTERNAL, "disk on fire"));
  absl::StatusOr<DownloadResult> result = Download();
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(IsRpcError(result.status()));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(Listing(), IsEmpty());
}

TEST_F(CliDownloadTest, UnsafeTraceIdRefusedBeforeAnyCall) {
  DownloadOptions options;
  options.trace_id = "../T1";
  options.output_root = root_;
  EXPECT_EQ(DownloadTrace(*stub_, options).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(server_.service().get_requests().empty());
}

}  // namespace
}  // namespace gpuctl::cli
