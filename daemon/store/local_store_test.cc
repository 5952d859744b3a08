#include "daemon/store/local_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/common/mutex.h"
#include "daemon/common/testing/fake_clock.h"
#include "daemon/common/trace_id.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

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
  void TearDown() override {
    SetLogSinkForTesting(nullptr);
    fs::remove_all(tmp_);
  }

  // Replaces store_ with a store opened anew on the same root.
  void Reopen(const LocalStoreOptions& options = {}) {
    store_.reset();
    auto store = LocalTraceStore::Create(root_, options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  // A complete trace: one data file of `bytes` bytes, then the manifest.
  std::string PutTrace(int64_t ms, const std::string& job, size_t bytes = 10) {
    std::string id = NewId(ms);
    EXPECT_TRUE(store_->PutFile(id, "h1-rank0-pid5.json.gz", std::string(bytes, 'x')).ok());
    EXPECT_TRUE(store_->PutManifest(Manifest(id, job)).ok());
    return id;
  }

  std::vector<std::string> ListIds(const std::string& job = "", int page_size = 0) {
    std::vector<std::string> ids;
    v1::ListTracesRequest req;
    req.set_job_id(job);
    req.set_page_size(page_size);
    do {
      auto page = store_->List(req);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      for (const auto& m : page->traces()) ids.push_back(m.trace_id());
      req.set_page_token(page->next_page_token());
    } while (!req.page_token().empty());
    return ids;
  }

  bool OnDisk(const std::string& id) { return fs::exists(root_ + "/" + id); }

  // Log lines from now on.
  void CaptureLog() {
    SetLogSinkForTesting([this](absl::string_view line) {
      MutexLock lock(&log_mu_);
      log_.emplace_back(line);
    });
  }
  std::vector<std::string> LogLines(absl::string_view containing) {
    MutexLock lock(&log_mu_);
    std::vector<std::string> lines;
    for (const std::string& line : log_) {
      if (absl::StrContains(line, containing)) lines.push_back(line);
    }
    return lines;
  }

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
  Mutex log_mu_;
  std::vector<std::string> log_ ABSL_GUARDED_BY(log_mu_);
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
  std::string data = std::string("binary\0data", 11) + std::string(100000, 'z');
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
  std::string text = ReadAll(id, "_gpuctl/unknown.json");
  EXPECT_NE(text.find("\"traceId\": \"" + id + "\""), std::string::npos) << text;
  EXPECT_NE(text.find('\n'), std::string::npos);  // pretty
  EXPECT_EQ(store_->GetManifest(NewId(2000)).status().code(), absl::StatusCode::kNotFound);
  std::ofstream(root_ + "/" + id + "/_gpuctl/unknown.json") << "{not json";
  EXPECT_EQ(store_->GetManifest(id).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(LocalStoreTest, OnlyProcessTracesAreTopLevelJsonAndEachHostHasItsManifest) {
  LocalStoreOptions options;
  options.host = "node_7/a";  // made safe as in the trace files' names
  Reopen(options);
  EXPECT_EQ(store_->ManifestName(), "_gpuctl/node-7-a.json");
  const std::string id = PutTrace(1000, "j");
  std::vector<std::string> top_level_json;
  for (const auto& e : fs::directory_iterator(root_ + "/" + id)) {
    const std::string name = e.path().filename().string();
    if (absl::EndsWith(name, ".json") || absl::EndsWith(name, ".gz"))
      top_level_json.push_back(name);
  }
  // What Holistic Trace Analysis would open as ranks.
  EXPECT_THAT(top_level_json, ElementsAre("h1-rank0-pid5.json.gz"));
  EXPECT_TRUE(fs::is_regular_file(root_ + "/" + id + "/_gpuctl/node-7-a.json"));
  // Served under its name, and under the old one.
  EXPECT_EQ(ReadAll(id, "_gpuctl/node-7-a.json"), ReadAll(id, "manifest.json"));
  EXPECT_EQ(store_->PutFile(id, "_gpuctl", "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->PutFile(id, "_gpuctl/node-7-a.json", "x").code(),
            absl::StatusCode::kInvalidArgument);
  for (const char* bad : {"_gpuctl/../x.json", "_gpuctl/.x.json", "_gpuctl/a/b.json", "_gpuctl/"}) {
    EXPECT_EQ(store_->Open(id, bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  // Its manifest says rank 0 and other zero values explicitly.
  v1::TraceManifest m = Manifest(id, "j");
  m.mutable_results(0)->set_rank(0);
  ASSERT_TRUE(store_->PutManifest(m).ok());
  const std::string text = ReadAll(id, store_->ManifestName());
  EXPECT_THAT(text, ::testing::HasSubstr("\"rank\": 0"));
  EXPECT_THAT(text, ::testing::HasSubstr("\"droppedEvents\": \"0\""));
}

TEST_F(LocalStoreTest, AStoreInTheOldLayoutStaysReadableAndMovesOnRewrite) {
  // As an older gpuctld left it: manifest.json next to the process traces.
  const std::string old = NewId(1000);
  fs::create_directories(root_ + "/" + old);
  std::ofstream(root_ + "/" + old + "/h1-rank0-pid5.json.gz") << "data";
  std::ofstream(root_ + "/" + old + "/manifest.json")
      << "{\"traceId\": \"" << old << "\", \"jobId\": \"legacy\", \"host\": \"h1\"}";
  const std::string other_host = NewId(2000);
  fs::create_directories(root_ + "/" + other_host + "/_gpuctl");
  std::ofstream(root_ + "/" + other_host + "/_gpuctl/renamed.json")
      << "{\"trace_id\": \"" << other_host << "\", \"job_id\": \"legacy\"}";
  std::ofstream(root_ + "/" + other_host + "/_gpuctl/.tmp-9-9") << "{";
  LocalStoreOptions options;
  options.remove_incomplete = true;
  Reopen(options);
  EXPECT_THAT(ListIds("legacy"), ElementsAre(other_host, old));
  EXPECT_FALSE(fs::exists(root_ + "/" + other_host + "/_gpuctl/.tmp-9-9"));
  EXPECT_EQ(store_->GetManifest(old)->job_id(), "legacy");
  EXPECT_EQ(store_->GetManifest(other_host)->job_id(), "legacy");
  EXPECT_THAT(ReadAll(old, store_->ManifestName()), ::testing::HasSubstr("jobId"));

  // Written again (as the uploader does), it moves to the new place.
  v1::TraceManifest m = *store_->GetManifest(old);
  m.set_location("s3://b/x");
  ASSERT_TRUE(store_->PutManifest(m).ok());
  EXPECT_FALSE(fs::exists(root_ + "/" + old + "/manifest.json"));
  EXPECT_EQ(store_->GetManifest(old)->location(), "s3://b/x");
  std::optional<StoredTrace> trace = store_->Find(old);
  ASSERT_TRUE(trace.has_value());
  EXPECT_EQ(trace->files.size(), 2u);

  // Deleted whole, whichever layout.
  ASSERT_TRUE(store_->Delete(other_host).ok());
  EXPECT_FALSE(OnDisk(other_host));
  ASSERT_TRUE(store_->Delete(old).ok());
  EXPECT_FALSE(OnDisk(old));
}

TEST_F(LocalStoreTest, AnUnknownTraceIsNotFoundWithoutTheStorePath) {
  const std::string id = NewId(1000);
  absl::Status st = store_->GetManifest(id).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(st.message(), "no trace " + id);
  EXPECT_EQ(store_->Open(id, store_->ManifestName()).status().message(), "no trace " + id);
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

// Listing by trigger filters in the daemon and still fills each page; a
// manifest without a trigger (an older daemon's) is on demand.
TEST_F(LocalStoreTest, ListsByTriggerAcrossPages) {
  std::vector<std::string> scheduled;
  std::vector<std::string> on_demand;
  for (int i = 0; i < 9; ++i) {
    const std::string id = NewId(1000 + i);
    v1::TraceManifest manifest = Manifest(id, "j");
    if (i % 3 == 0) {
      manifest.mutable_trigger()->set_kind(v1::TRIGGER_KIND_SCHEDULED);
      scheduled.insert(scheduled.begin(), id);
    } else {
      if (i % 3 == 1) manifest.mutable_trigger()->set_kind(v1::TRIGGER_KIND_ON_DEMAND);
      on_demand.insert(on_demand.begin(), id);
    }
    ASSERT_TRUE(store_->PutManifest(manifest).ok());
  }
  auto ids_of = [this](v1::TriggerKind kind, int page_size) {
    std::vector<std::string> ids;
    v1::ListTracesRequest req;
    req.set_trigger(kind);
    req.set_page_size(page_size);
    do {
      auto page = store_->List(req);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      EXPECT_LE(page->traces_size(), page_size);
      for (const v1::TraceManifest& t : page->traces()) ids.push_back(t.trace_id());
      req.set_page_token(page->next_page_token());
    } while (!req.page_token().empty());
    return ids;
  };
  EXPECT_EQ(ids_of(v1::TRIGGER_KIND_SCHEDULED, 2), scheduled);
  EXPECT_EQ(ids_of(v1::TRIGGER_KIND_ON_DEMAND, 4), on_demand);
  EXPECT_TRUE(ids_of(v1::TRIGGER_KIND_ANOMALY, 3).empty());
  EXPECT_EQ(ids_of(v1::TRIGGER_KIND_UNSPECIFIED, 100).size(), 9u);

  v1::ListTracesRequest bad;
  bad.set_trigger(static_cast<v1::TriggerKind>(99));
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

TEST_F(LocalStoreTest, PutFileRefusesTheManifestName) {
  EXPECT_EQ(store_->PutFile(NewId(1), "manifest.json", "{}").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(LocalStoreTest, RemoveDataFilesKeepsTheManifestListedAndCounted) {
  const std::string id = PutTrace(1000, "j", 100);
  ASSERT_TRUE(store_->PutFile(id, "h1-rank1-pid6.json.gz", std::string(50, 'y')).ok());
  const uint64_t manifest_bytes = fs::file_size(root_ + "/" + id + "/_gpuctl/unknown.json");
  auto reader = store_->Open(id, "h1-rank1-pid6.json.gz");
  ASSERT_TRUE(reader.ok()) << reader.status();

  ASSERT_TRUE(store_->RemoveDataFiles(id).ok());
  EXPECT_FALSE(fs::exists(root_ + "/" + id + "/h1-rank0-pid5.json.gz"));
  EXPECT_FALSE(fs::exists(root_ + "/" + id + "/h1-rank1-pid6.json.gz"));
  EXPECT_THAT(ListIds(), ElementsAre(id));
  EXPECT_EQ(store_->GetManifest(id)->job_id(), "j");
  std::optional<StoredTrace> trace = store_->Find(id);
  ASSERT_TRUE(trace.has_value());
  EXPECT_THAT(trace->files,
              ElementsAre(std::make_pair(std::string("manifest.json"), manifest_bytes)));
  EXPECT_EQ(trace->total_bytes, manifest_bytes);
  EXPECT_EQ(store_->Totals().bytes, manifest_bytes);
  EXPECT_EQ(store_->Open(id, "h1-rank0-pid5.json.gz").status().code(), absl::StatusCode::kNotFound);
  // A reader opened before keeps its file.
  std::string chunk;
  ASSERT_TRUE((*reader)->Read(100, &chunk).ok());
  EXPECT_EQ(chunk, std::string(50, 'y'));

  Reopen();
  EXPECT_EQ(store_->Find(id)->files, trace->files);
  EXPECT_EQ(store_->Totals().bytes, manifest_bytes);
}

TEST_F(LocalStoreTest, RemoveDataFilesRefusesTheOnlyCopy) {
  const std::string awaiting = PutTrace(1000, "j");
  ASSERT_TRUE(store_->SetAwaitingUpload(awaiting, true).ok());
  EXPECT_EQ(store_->RemoveDataFiles(awaiting).code(), absl::StatusCode::kFailedPrecondition);
  const std::string in_progress = NewId(2000);
  ASSERT_TRUE(store_->PutFile(in_progress, "f", "x").ok());
  EXPECT_EQ(store_->RemoveDataFiles(in_progress).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->RemoveDataFiles(NewId(3000)).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->RemoveDataFiles("../x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(fs::exists(root_ + "/" + awaiting + "/h1-rank0-pid5.json.gz"));
  EXPECT_TRUE(fs::exists(root_ + "/" + in_progress + "/f"));
}

TEST_F(LocalStoreTest, IndexSurvivesARestart) {
  std::vector<std::string> ids;
  ids.reserve(6);
  for (int i = 0; i < 6; ++i) ids.push_back(PutTrace(1000 + i, i % 3 == 0 ? "a" : "b", 100 + i));
  ASSERT_TRUE(store_->PutFile(ids[2], "h1-rank1-pid6.json.gz", "second").ok());
  ASSERT_TRUE(store_->SetAwaitingUpload(ids[4], true).ok());
  ASSERT_TRUE(store_->SetAwaitingUpload(ids[1], true).ok());
  std::string in_progress = NewId(9000);
  ASSERT_TRUE(store_->PutFile(in_progress, "f", "x").ok());
  std::optional<StoredTrace> before = store_->Find(ids[2]);
  StoreTotals totals = store_->Totals();
  std::vector<std::string> listed = ListIds("", 4);
  std::vector<std::string> listed_b = ListIds("b", 1);
  EXPECT_THAT(listed, ElementsAre(ids[5], ids[4], ids[3], ids[2], ids[1], ids[0]));
  EXPECT_THAT(listed_b, ElementsAre(ids[5], ids[4], ids[2], ids[1]));
  EXPECT_THAT(store_->AwaitingUpload(), ElementsAre(ids[1], ids[4]));
  EXPECT_EQ(totals.traces, 7u);
  EXPECT_EQ(totals.complete, 6u);

  Reopen();
  EXPECT_EQ(ListIds("", 4), listed);
  EXPECT_EQ(ListIds("b", 1), listed_b);
  EXPECT_THAT(store_->AwaitingUpload(), ElementsAre(ids[1], ids[4]));
  std::optional<StoredTrace> after = store_->Find(ids[2]);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->files, before->files);
  EXPECT_EQ(after->total_bytes, before->total_bytes);
  EXPECT_EQ(after->job_id, "b");
  EXPECT_EQ(after->created, *TraceIdTime(ids[2]));
  EXPECT_TRUE(after->complete);
  EXPECT_EQ(store_->Totals().bytes, totals.bytes);
  EXPECT_EQ(store_->Totals().traces, 7u);
  EXPECT_EQ(store_->Totals().awaiting_upload, 2u);
  EXPECT_FALSE(store_->Find(in_progress)->complete);  // kept without remove_incomplete
}

TEST_F(LocalStoreTest, StartupRemovesIncompleteTracesAndTemporaryFiles) {
  std::string complete = PutTrace(1000, "j");
  std::string unfinished = NewId(2000);
  ASSERT_TRUE(store_->PutFile(unfinished, "h1-rank0-pid5.json.gz", "data").ok());
  ASSERT_TRUE(store_->SetAwaitingUpload(unfinished, true).ok());
  // A deletion cut short after its first step: the manifest is gone.
  std::string half_deleted = PutTrace(3000, "j");
  fs::remove(root_ + "/" + half_deleted + "/_gpuctl/unknown.json");
  // Writes cut short: a data file's and a manifest's temporary files.
  std::ofstream(root_ + "/" + complete + "/.tmp-77-0") << "partial data";
  std::ofstream(root_ + "/" + complete + "/.tmp-77-1") << "{\"trace_id\": ";
  std::string empty = NewId(4000);
  fs::create_directory(root_ + "/" + empty);
  fs::create_directory(root_ + "/not-a-trace");
  std::ofstream(root_ + "/not-a-trace/.tmp-1-1") << "not ours";

  CaptureLog();
  LocalStoreOptions options;
  options.remove_incomplete = true;
  Reopen(options);
  EXPECT_TRUE(OnDisk(complete));
  EXPECT_FALSE(OnDisk(unfinished));
  EXPECT_FALSE(OnDisk(half_deleted));
  EXPECT_FALSE(OnDisk(empty));
  EXPECT_TRUE(fs::exists(root_ + "/not-a-trace/.tmp-1-1"));
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(root_ + "/" + complete)) {
    left.push_back(e.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  EXPECT_THAT(left, ElementsAre("_gpuctl", "h1-rank0-pid5.json.gz"));
  EXPECT_THAT(ListIds(), ElementsAre(complete));
  EXPECT_THAT(store_->AwaitingUpload(), IsEmpty());
  EXPECT_EQ(store_->Totals().traces, 1u);
  EXPECT_EQ(LogLines("removed an incomplete trace").size(), 3u);
  std::vector<std::string> summary = LogLines("trace store indexed");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_THAT(summary[0], ::testing::HasSubstr("removed_temporary_files=2"));
  EXPECT_THAT(summary[0], ::testing::HasSubstr("removed_incomplete_traces=3"));
}

TEST_F(LocalStoreTest, ListSkipsTracesWhoseManifestVanishedAndStillFillsThePage) {
  std::vector<std::string> ids;
  ids.reserve(6);
  for (int i = 0; i < 6; ++i) ids.push_back(PutTrace(1000 + i, "j"));
  fs::remove(root_ + "/" + ids[4] + "/_gpuctl/unknown.json");
  fs::remove(root_ + "/" + ids[3] + "/_gpuctl/unknown.json");
  v1::ListTracesRequest req;
  req.set_page_size(3);
  auto page = store_->List(req);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->traces_size(), 3);
  EXPECT_EQ(page->traces(0).trace_id(), ids[5]);
  EXPECT_EQ(page->traces(1).trace_id(), ids[2]);
  EXPECT_EQ(page->traces(2).trace_id(), ids[1]);
  EXPECT_EQ(page->traces(2).job_id(), "j");
  req.set_page_token(page->next_page_token());
  page = store_->List(req);
  ASSERT_EQ(page->traces_size(), 1);
  EXPECT_EQ(page->traces(0).trace_id(), ids[0]);
  EXPECT_TRUE(page->next_page_token().empty());
}

TEST_F(LocalStoreTest, PagesAreStableWhileTracesAreAdded) {
  std::vector<std::string> ids;
  ids.reserve(5);
  for (int i = 0; i < 5; ++i) ids.push_back(PutTrace(1000 + i, "j"));
  v1::ListTracesRequest req;
  req.set_page_size(2);
  auto page = store_->List(req);
  ASSERT_TRUE(page.ok());
  PutTrace(5000, "j");  // newer: belongs before the first page
  req.set_page_token(page->next_page_token());
  page = store_->List(req);
  ASSERT_EQ(page->traces_size(), 2);
  EXPECT_EQ(page->traces(0).trace_id(), ids[2]);
}

class LocalStoreRetentionTest : public LocalStoreTest {
 protected:
  // Trace ids carry real creation times; the clock starts just after them.
  void OpenWith(RetentionPolicy policy, absl::Time now = absl::FromUnixMillis(100'000)) {
    clock_.Set(now);
    Reopen(WithRetention(policy));
  }
  LocalStoreOptions WithRetention(RetentionPolicy policy) {
    LocalStoreOptions options;
    options.retention = policy;
    options.clock = &clock_;
    return options;
  }
  gpuctl::testing::FakeClock clock_;
};

TEST_F(LocalStoreRetentionTest, CountEvictsTheOldestAfterEachCompletedTrace) {
  OpenWith({0, absl::ZeroDuration(), 3});
  CaptureLog();
  std::vector<std::string> ids;
  ids.reserve(5);
  for (int i = 0; i < 5; ++i) ids.push_back(PutTrace(1000 + i, "j"));
  EXPECT_THAT(ListIds(), ElementsAre(ids[4], ids[3], ids[2]));
  EXPECT_FALSE(OnDisk(ids[0]));
  EXPECT_FALSE(OnDisk(ids[1]));
  EXPECT_TRUE(OnDisk(ids[2]));
  EXPECT_EQ(store_->Totals().traces, 3u);
  std::vector<std::string> lines = LogLines("trace evicted");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], ::testing::HasSubstr("trace_id=" + ids[0]));
  EXPECT_THAT(lines[0], ::testing::HasSubstr("reason=max_count"));
  EXPECT_THAT(lines[0], ::testing::HasSubstr("max_count=3"));
  EXPECT_EQ(store_->EnforceRetention(), 0u);
}

TEST_F(LocalStoreRetentionTest, BytesEvictUntilTheStoreFits) {
  // A trace: 2500 bytes of data and a manifest of under 1000.
  OpenWith({7000, absl::ZeroDuration(), 0});
  CaptureLog();
  std::string a = PutTrace(1000, "j", 2500);
  std::string b = PutTrace(1001, "j", 2500);
  EXPECT_THAT(ListIds(), ElementsAre(b, a));
  std::string c = PutTrace(1002, "j", 2500);  // the store is over 7000 bytes with three
  EXPECT_THAT(ListIds(), ElementsAre(c, b));
  EXPECT_LE(store_->Totals().bytes, 7000u);
  std::vector<std::string> lines = LogLines("trace evicted");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], ::testing::HasSubstr("reason=max_bytes"));
}

TEST_F(LocalStoreRetentionTest, AgeEvictsWhenEnforcedPeriodically) {
  OpenWith({0, absl::Minutes(10), 0});
  CaptureLog();
  std::string old_trace = PutTrace(1000, "j");
  std::string newer = PutTrace(60'000, "j");
  EXPECT_EQ(store_->EnforceRetention(), 0u);
  clock_.Set(absl::FromUnixMillis(1000) + absl::Minutes(10) + absl::Seconds(1));
  EXPECT_EQ(store_->EnforceRetention(), 1u);
  EXPECT_THAT(ListIds(), ElementsAre(newer));
  EXPECT_FALSE(OnDisk(old_trace));
  std::vector<std::string> lines = LogLines("trace evicted");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], ::testing::HasSubstr("reason=max_age"));
  EXPECT_THAT(lines[0], ::testing::HasSubstr("age=10m1s"));
}

TEST_F(LocalStoreRetentionTest, NeverEvictsTracesInProgressReadOrAwaitingUpload) {
  const RetentionPolicy policy{0, absl::Minutes(1), 0};
  OpenWith(policy, absl::FromUnixMillis(2000));
  std::string in_progress = NewId(1000);
  ASSERT_TRUE(store_->PutFile(in_progress, "h1-rank0-pid5.json.gz", "data").ok());
  std::string being_read = PutTrace(1001, "j");
  auto reader = store_->Open(being_read, "h1-rank0-pid5.json.gz");
  ASSERT_TRUE(reader.ok());
  std::string awaiting = NewId(1002);
  ASSERT_TRUE(store_->SetAwaitingUpload(awaiting, true).ok());
  ASSERT_TRUE(store_->PutFile(awaiting, "f.json.gz", "data").ok());
  ASSERT_TRUE(store_->PutManifest(Manifest(awaiting, "j")).ok());
  std::string pinned = PutTrace(1003, "j");
  auto pin = store_->Pin(pinned);
  ASSERT_TRUE(pin.ok());
  std::string unprotected = PutTrace(1004, "j");
  EXPECT_EQ(store_->Totals().traces, 5u);
  EXPECT_EQ(store_->Find(being_read)->pins, 1);

  // All are past max_age; only the unprotected one may go.
  clock_.Advance(absl::Minutes(10));
  EXPECT_EQ(store_->EnforceRetention(), 1u);
  EXPECT_FALSE(OnDisk(unprotected));
  EXPECT_EQ(store_->Totals().traces, 4u);
  reader->reset();
  EXPECT_EQ(store_->EnforceRetention(), 1u);
  EXPECT_FALSE(OnDisk(being_read));
  pin->Release();
  EXPECT_EQ(store_->EnforceRetention(), 1u);
  EXPECT_FALSE(OnDisk(pinned));

  // The mark survives a restart.
  Reopen(WithRetention(policy));
  EXPECT_THAT(store_->AwaitingUpload(), ElementsAre(awaiting));
  EXPECT_EQ(store_->EnforceRetention(), 0u);
  EXPECT_THAT(ListIds(), ElementsAre(awaiting));
  // Uploaded: clearing the mark lets retention take it at once.
  ASSERT_TRUE(store_->SetAwaitingUpload(awaiting, false).ok());
  EXPECT_FALSE(OnDisk(awaiting));
  EXPECT_THAT(ListIds(), IsEmpty());
  EXPECT_TRUE(OnDisk(in_progress));
  EXPECT_EQ(store_->SetAwaitingUpload(NewId(5), false).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->SetAwaitingUpload("nope", true).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Pin("nope").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(LocalStoreRetentionTest, ProtectedTracesDoNotStopNewerOnesFromGoing) {
  // Limits are met with what may go: oldest first among the evictable.
  OpenWith({0, absl::ZeroDuration(), 2});
  std::string a = PutTrace(1000, "j");
  auto pin = store_->Pin(a);
  ASSERT_TRUE(pin.ok());
  std::string b = PutTrace(1001, "j");
  std::string c = PutTrace(1002, "j");
  EXPECT_THAT(ListIds(), ElementsAre(c, a));
  EXPECT_FALSE(OnDisk(b));
}

TEST_F(LocalStoreRetentionTest, AReaderKeepsReadingAcrossPinsAndDeletion) {
  OpenWith({});
  std::string id = PutTrace(1000, "j", 100000);
  auto reader = store_->Open(id, "h1-rank0-pid5.json.gz");
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(store_->Delete(id).code(), absl::StatusCode::kFailedPrecondition);
  // The store may go first; the reader's pin outlives it safely.
  store_.reset();
  std::string chunk;
  ASSERT_TRUE((*reader)->Read(1 << 20, &chunk).ok());
  EXPECT_EQ(chunk.size(), 100000u);
  reader->reset();
  Reopen();
  EXPECT_TRUE(store_->Delete(id).ok());
  EXPECT_FALSE(OnDisk(id));
  EXPECT_EQ(store_->Delete(id).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Open(id, "manifest.json").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ListIds(), IsEmpty());
}

TEST_F(LocalStoreRetentionTest, ConcurrentWritersReadersAndRetentionAgree) {
  OpenWith({0, absl::ZeroDuration(), 20});
  constexpr int kWriters = 3;
  constexpr int kTracesEach = 40;
  std::vector<std::vector<std::string>> ids(kWriters);
  for (int w = 0; w < kWriters; ++w) {
    for (int i = 0; i < kTracesEach; ++i) ids[w].push_back(NewId(1000 + i * kWriters + w));
  }
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  threads.reserve(kWriters);
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (const std::string& id : ids[w]) {
        EXPECT_TRUE(store_->PutFile(id, "a.json.gz", std::string(1000, 'a')).ok());
        EXPECT_TRUE(store_->PutManifest(Manifest(id, w % 2 ? "odd" : "even")).ok());
      }
    });
  }
  std::thread reader([&] {
    while (!done.load()) {
      v1::ListTracesRequest req;
      req.set_page_size(5);
      auto page = store_->List(req);
      ASSERT_TRUE(page.ok());
      for (const auto& m : page->traces()) {
        auto r = store_->Open(m.trace_id(), "a.json.gz");
        if (!r.ok()) continue;  // evicted between the listing and the open
        std::string data;
        ASSERT_TRUE((*r)->Read(4096, &data).ok());
        EXPECT_EQ(data, std::string(1000, 'a'));
      }
      store_->EnforceRetention();
    }
  });
  for (std::thread& t : threads) t.join();
  done = true;
  reader.join();
  store_->EnforceRetention();
  EXPECT_EQ(store_->Totals().traces, 20u);
  EXPECT_EQ(ListIds().size(), 20u);
  StoreTotals totals = store_->Totals();
  size_t dirs = 0;
  for (const auto& e : fs::directory_iterator(root_)) {
    (void)e;
    ++dirs;
  }
  EXPECT_EQ(dirs, 20u);
  Reopen();
  EXPECT_EQ(store_->Totals().bytes, totals.bytes);
  EXPECT_EQ(store_->Totals().traces, 20u);
}

}  // namespace
}  // namespace gpuctl::daemon
