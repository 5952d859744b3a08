#include "daemon/core/local_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/trace_id.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

namespace fs = std::filesystem;

class LocalStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpuctl-store-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    tmp_ = tmpl;
    root_ = tmp_ + "/a/b/traces";
    auto store = LocalTraceStore::Create(root_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  void TearDown() override { fs::remove_all(tmp_); }

  std::string NewId(int64_t ms) { return GenerateTraceId(absl::FromUnixMillis(ms), gen_); }

  std::string ReadAll(absl::string_view id, absl::string_view name) {
    auto reader = store_->Open(id, name);
    EXPECT_TRUE(reader.ok()) << reader.status();
    std::string all, chunk;
    while (true) {
      EXPECT_TRUE((*reader)->Read(7, &chunk).ok());
      if (chunk.empty()) break;
      all += chunk;
    }
    EXPECT_EQ(all.size(), (*reader)->size());
    return all;
  }

  v1::TraceManifest Manifest(const std::string& id, const std::string& job) {
    v1::TraceManifest m;
    m.set_trace_id(id);
    m.set_job_id(job);
    m.set_host("h1");
    m.add_requested_pids(5);
    auto* r = m.add_results();
    r->set_pid(5);
    r->set_status(v1::CAPTURE_STATUS_OK);
    r->set_file("h1-rank0-pid5.json.gz");
    return m;
  }

  absl::BitGen gen_;
  std::string tmp_;
  std::string root_;
  std::unique_ptr<LocalTraceStore> store_;
};

TEST_F(LocalStoreTest, CreatesRootWithRestrictiveMode) {
  struct stat st;
  ASSERT_EQ(::stat(root_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777 & ~0750, 0u);
  EXPECT_EQ(store_->Location("x"), root_ + "/x");
}

TEST_F(LocalStoreTest, PutFileAndReadBack) {
  std::string id = NewId(1000);
  std::string data = "binary\0data" + std::string(100000, 'z');
  ASSERT_TRUE(store_->PutFile(id, "h1-rank0-pid5.json.gz", data).ok());
  EXPECT_EQ(ReadAll(id, "h1-rank0-pid5.json.gz"), data);
  // Replacing is atomic and leaves no temporary files.
  ASSERT_TRUE(store_->PutFile(id, "h1-rank0-pid5.json.gz", "v2").ok());
  EXPECT_EQ(ReadAll(id, "h1-rank0-pid5.json.gz"), "v2");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(root_ + "/" + id)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
  EXPECT_EQ(store_->Open(id, "missing.json").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(LocalStoreTest, RefusesTraversalAndBadNames) {
  std::string id = NewId(1000);
  for (const char* name : {"../x", "..", ".", ".hidden", "a/b", "", "a b", "x\n", "é"}) {
    EXPECT_EQ(store_->PutFile(id, name, "x").code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_FALSE(store_->Open(id, name).ok()) << name;
  }
  EXPECT_FALSE(store_->PutFile(id, std::string(256, 'a'), "x").ok());
  EXPECT_TRUE(store_->PutFile(id, std::string(255, 'a'), "x").ok());
  for (const char* bad_id : {"../../etc", "..", "", "018CC251-F47B-7C4D-9A2B-3C4D5E6F7A8B"}) {
    EXPECT_EQ(store_->PutFile(bad_id, "f", "x").code(), absl::StatusCode::kInvalidArgument);
    EXPECT_FALSE(store_->GetManifest(bad_id).ok());
    EXPECT_FALSE(store_->Open(bad_id, "f").ok());
  }
  v1::TraceManifest m;
  m.set_trace_id("../x");
  EXPECT_FALSE(store_->PutManifest(m).ok());
  EXPECT_FALSE(fs::exists(tmp_ + "/a/b/x"));
}

TEST_F(LocalStoreTest, ManifestRoundTripsAsJson) {
  std::string id = NewId(1000);
  v1::TraceManifest m = Manifest(id, "42");
  ASSERT_TRUE(store_->PutManifest(m).ok());
  auto back = store_->GetManifest(id);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), m.SerializeAsString());
  std::string text = ReadAll(id, "manifest.json");
  EXPECT_NE(text.find("\"trace_id\": \"" + id + "\""), std::string::npos) << text;
  EXPECT_NE(text.find('\n'), std::string::npos);  // pretty
  EXPECT_EQ(store_->GetManifest(NewId(2000)).status().code(), absl::StatusCode::kNotFound);
  std::ofstream(root_ + "/" + id + "/manifest.json") << "{not json";
  EXPECT_EQ(store_->GetManifest(id).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(LocalStoreTest, ListsNewestFirstWithPagingAndJobFilter) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(NewId(1000 + i));
    ASSERT_TRUE(store_->PutManifest(Manifest(ids.back(), i % 2 == 0 ? "even" : "odd")).ok());
  }
  // A trace still in progress (no manifest) and junk are skipped.
  ASSERT_TRUE(store_->PutFile(NewId(5000), "f", "x").ok());
  fs::create_directory(root_ + "/not-a-trace");

  v1::ListTracesRequest req;
  req.set_page_size(2);
  auto page1 = store_->List(req);
  ASSERT_TRUE(page1.ok()) << page1.status();
  ASSERT_EQ(page1->traces_size(), 2);
  EXPECT_EQ(page1->traces(0).trace_id(), ids[4]);
  EXPECT_EQ(page1->traces(1).trace_id(), ids[3]);
  ASSERT_FALSE(page1->next_page_token().empty());
  req.set_page_token(page1->next_page_token());
  auto page2 = store_->List(req);
  ASSERT_EQ(page2->traces_size(), 2);
  EXPECT_EQ(page2->traces(0).trace_id(), ids[2]);
  req.set_page_token(page2->next_page_token());
  auto page3 = store_->List(req);
  ASSERT_EQ(page3->traces_size(), 1);
  EXPECT_EQ(page3->traces(0).trace_id(), ids[0]);
  EXPECT_TRUE(page3->next_page_token().empty());

  v1::ListTracesRequest by_job;
  by_job.set_job_id("even");
  auto even = store_->List(by_job);
  ASSERT_EQ(even->traces_size(), 3);
  EXPECT_EQ(even->traces(0).trace_id(), ids[4]);
  EXPECT_EQ(even->traces(2).trace_id(), ids[0]);

  v1::ListTracesRequest bad;
  bad.set_page_token("../etc");
  EXPECT_EQ(store_->List(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad.set_page_token("");
  bad.set_page_size(1001);
  EXPECT_EQ(store_->List(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(LocalStoreTest, CreateRemovesStaleTemporaryFiles) {
  std::string id = NewId(1000);
  ASSERT_TRUE(store_->PutFile(id, "keep.json", "x").ok());
  std::ofstream(root_ + "/" + id + "/.tmp-123-0") << "partial";
  auto reopened = LocalTraceStore::Create(root_ + "/");
  ASSERT_TRUE(reopened.ok());
  EXPECT_FALSE(fs::exists(root_ + "/" + id + "/.tmp-123-0"));
  EXPECT_TRUE(fs::exists(root_ + "/" + id + "/keep.json"));
  EXPECT_EQ((*reopened)->Location(id), root_ + "/" + id);
}

}  // namespace
}  // namespace gpuctl::daemon
