// S3Client against a real S3 endpoint, such as the Ceph radosgw that
// scripts/ceph/start.sh DIR starts:
//
//   scripts/ceph/start.sh /tmp/ceph && set -a && . /tmp/ceph/env && set +a
//   build/bin/s3_client_radosgw_test
//   scripts/ceph/stop.sh /tmp/ceph
//
// Reads S3_ENDPOINT, S3_REGION, S3_BUCKET, AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY (S3_PATH_STYLE=0 selects virtual-hosted buckets);
// every test skips when S3_ENDPOINT is unset. Objects go under a fresh
// prefix and are deleted again.

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/common/trace_id.h"
#include "daemon/s3/object_body.h"
#include "daemon/s3/orphaned_uploads.h"
#include "daemon/s3/s3_client.h"
#include "daemon/s3/trace_object_key.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::s3 {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Env(const char* name, const char* fallback = "") {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

std::string Incompressible(size_t n) {
  std::mt19937_64 gen(std::random_device{}());
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = gen();
    for (size_t j = 0; j < 8 && i + j < n; ++j) s[i + j] = static_cast<char>(v >> (8 * j));
  }
  return s;
}

class RadosgwTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Env("S3_ENDPOINT").empty()) {
      GTEST_SKIP() << "S3_ENDPOINT is unset: start a gateway with scripts/ceph/start.sh DIR "
                      "and load DIR/env";
    }
    config_.endpoint = Env("S3_ENDPOINT");
    config_.region = Env("S3_REGION", "us-east-1");
    config_.bucket = Env("S3_BUCKET");
    config_.path_style = Env("S3_PATH_STYLE", "1") != "0";
    config_.max_attempts = 3;
    absl::BitGen gen;
    prefix_ = absl::StrCat("gpuctl-it/", GenerateTraceId(absl::Now(), gen));
    std::string tmpl = (fs::temp_directory_path() / "gpuctl-s3-it-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::unique_ptr<S3Client> Client(const S3Config& config) {
    auto client = S3Client::Create(config);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }
  static absl::StatusOr<std::string> Get(S3Client& client, absl::string_view key,
                                         std::optional<ByteRange> range = std::nullopt) {
    std::string out;
    absl::Status st = client.GetObject(
        key,
        [&](absl::string_view chunk) {
          out.append(chunk.data(), chunk.size());
          return absl::OkStatus();
        },
        range);
    if (!st.ok()) return st;
    return out;
  }
  std::set<std::string> ListAll(S3Client& client, const std::string& prefix, int page_size) {
    std::set<std::string> keys;
    ListObjectsRequest req;
    req.prefix = prefix;
    req.max_keys = page_size;
    for (int pages = 0; pages < 100; ++pages) {
      auto page = client.ListObjects(req);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      EXPECT_LE(page->objects.size(), static_cast<size_t>(page_size));
      for (const auto& o : page->objects) keys.insert(o.key);
      if (page->next_continuation_token.empty()) break;
      req.continuation_token = page->next_continuation_token;
    }
    return keys;
  }

  S3Config config_;
  std::string prefix_;
  std::string dir_;
};

TEST_F(RadosgwTest, PutGetListDelete) {
  auto client = Client(config_);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->credentials_source(), "environment");
  absl::BitGen gen;
  std::string id = GenerateTraceId(absl::Now(), gen);
  // A host's manifest: the one key of a trace with a slash in its file part.
  auto manifest_key = TraceObjectKey(prefix_, id, "_gpuctl/node-1.json");
  ASSERT_TRUE(manifest_key.ok());
  const std::vector<std::pair<std::string, std::string>> objects = {
      {*manifest_key, "{\"trace_id\": \"" + id + "\"}"},
      {prefix_ + "/odd keys/a b+c~é=&.json", "odd"},
      {prefix_ + "/empty", ""},
  };
  for (const auto& [key, data] : objects) {
    absl::Status st = client->PutObject(key, data);
    ASSERT_TRUE(st.ok()) << st;
  }
  for (const auto& [key, data] : objects) {
    auto got = Get(*client, key);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, data) << key;
    auto info = client->HeadObject(key);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->size, data.size());
    EXPECT_FALSE(info->etag.empty());
  }
  auto part = Get(*client, objects[0].first, ByteRange{2, 8});
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(*part, objects[0].second.substr(2, 8));

  // Two pages of two, then one.
  std::set<std::string> expected;
  for (const auto& o : objects) expected.insert(o.first);
  EXPECT_EQ(ListAll(*client, prefix_ + "/", 2), expected);
  ListObjectsRequest by_dir;
  by_dir.prefix = prefix_ + "/";
  by_dir.delimiter = "/";
  auto dirs = client->ListObjects(by_dir);
  ASSERT_TRUE(dirs.ok()) << dirs.status();
  EXPECT_EQ(dirs->objects.size(), 1u);  // "empty"
  EXPECT_THAT(dirs->common_prefixes, ::testing::Contains(prefix_ + "/odd keys/"));

  for (const auto& o : objects) ASSERT_TRUE(client->DeleteObject(o.first).ok());
  EXPECT_TRUE(ListAll(*client, prefix_ + "/", 1000).empty());
  EXPECT_TRUE(absl::IsNotFound(client->HeadObject(objects[0].first).status()));
  absl::Status gone = Get(*client, objects[0].first).status();
  EXPECT_TRUE(absl::IsNotFound(gone)) << gone;
  EXPECT_THAT(gone.message(), HasSubstr("NoSuchKey"));
  EXPECT_TRUE(client->DeleteObject(objects[0].first).ok()) << "deleting twice is fine";
}

TEST_F(RadosgwTest, MultipartUploadOfIncompressibleFile) {
  S3Config config = config_;
  config.part_size = 5 * kMiB;
  config.multipart_threshold = 5 * kMiB;
  auto client = Client(config);
  ASSERT_NE(client, nullptr);
  const std::string data = Incompressible(12 * kMiB);
  const std::string path = dir_ + "/trace.json.gz";
  std::ofstream(path, std::ios::binary) << data;
  const std::string key = prefix_ + "/big.json.gz";

  absl::Time start = absl::Now();
  PutOptions options;
  options.content_type = "application/gzip";
  absl::Status st = client->PutObjectFromFile(key, path, options);
  ASSERT_TRUE(st.ok()) << st;
  absl::Duration took = absl::Now() - start;
  std::cout << "12 MiB multipart upload took " << absl::FormatDuration(took) << "\n";

  auto info = client->HeadObject(key);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->size, data.size());
  EXPECT_TRUE(absl::EndsWith(info->etag, "-3\"")) << "a 3-part upload: " << info->etag;
  EXPECT_EQ(info->content_type, "application/gzip");
  auto got = Get(*client, key);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Sha256Hex(*got), Sha256Hex(data));
  // A range across the first part boundary.
  auto across = Get(*client, key, ByteRange{5 * kMiB - 10, 20});
  ASSERT_TRUE(across.ok()) << across.status();
  EXPECT_TRUE(*across == data.substr(5 * kMiB - 10, 20));
  ASSERT_TRUE(client->DeleteObject(key).ok());
}

TEST_F(RadosgwTest, ListsAndAbortsMultipartUploads) {
  auto client = Client(config_);
  ASSERT_NE(client, nullptr);
  const std::string key = prefix_ + "/orphan-rank0-pid1.json.gz";
  const absl::Time before = absl::Now() - absl::Minutes(5);  // the gateway's clock may differ
  auto upload_id = client->CreateMultipartUpload(key);
  ASSERT_TRUE(upload_id.ok()) << upload_id.status();

  auto listed = client->ListMultipartUploads(prefix_ + "/");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_FALSE(listed->truncated);
  ASSERT_EQ(listed->uploads.size(), 1u);
  EXPECT_EQ(listed->uploads[0].key, key);
  EXPECT_EQ(listed->uploads[0].upload_id, *upload_id);
  EXPECT_GT(listed->uploads[0].initiated, before);
  EXPECT_LT(listed->uploads[0].initiated, absl::Now() + absl::Minutes(5));

  ASSERT_TRUE(client->AbortMultipartUpload(key, *upload_id).ok());
  auto after = client->ListMultipartUploads(prefix_ + "/");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(after->uploads.empty());
  EXPECT_TRUE(client->AbortMultipartUpload(key, *upload_id).ok()) << "aborting twice is fine";
}

TEST_F(RadosgwTest, SweepAbortsOnlyThisHostsOrphanedUploads) {
  S3Config config = config_;
  config.prefix = prefix_;
  auto client = Client(config);
  ASSERT_NE(client, nullptr);
  absl::BitGen gen;
  const std::string id = GenerateTraceId(absl::Now(), gen);
  auto mine = TraceObjectKey(prefix_, id, "it-host-rank0-pid1.json.gz");
  auto theirs = TraceObjectKey(prefix_, id, "it-host-2-rank0-pid1.json.gz");
  ASSERT_TRUE(mine.ok() && theirs.ok());
  auto mine_id = client->CreateMultipartUpload(*mine);
  auto theirs_id = client->CreateMultipartUpload(*theirs);
  ASSERT_TRUE(mine_id.ok()) << mine_id.status();
  ASSERT_TRUE(theirs_id.ok()) << theirs_id.status();

  // A start far in the future makes both uploads old enough.
  OrphanedUploadsReport report =
      AbortOrphanedUploads(*client, "it-host", absl::Now() + absl::Hours(2), [] { return false; });
  EXPECT_TRUE(report.status.ok()) << report.status;
  EXPECT_EQ(report.listed, 2u);
  EXPECT_EQ(report.aborted, 1u);
  auto left = client->ListMultipartUploads(prefix_ + "/");
  ASSERT_TRUE(left.ok()) << left.status();
  ASSERT_EQ(left->uploads.size(), 1u);
  EXPECT_EQ(left->uploads[0].key, *theirs);
  EXPECT_TRUE(client->AbortMultipartUpload(*theirs, *theirs_id).ok());
}

TEST_F(RadosgwTest, WrongSecretIsAClearAuthenticationError) {
  S3Config config = config_;
  config.access_key_id = Env("AWS_ACCESS_KEY_ID");
  config.secret_access_key = "not-the-secret";
  auto client = Client(config);
  ASSERT_NE(client, nullptr);
  absl::Status st = client->PutObject(prefix_ + "/denied", "x");
  EXPECT_TRUE(absl::IsPermissionDenied(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("SignatureDoesNotMatch"));
  EXPECT_THAT(st.message(), HasSubstr("at " + config.endpoint));
  EXPECT_THAT(st.message(), HasSubstr("bucket \"" + config.bucket + "\""));
  EXPECT_THAT(st.message(), HasSubstr("HTTP 403"));
  EXPECT_THAT(st.message(), ::testing::Not(HasSubstr("attempts"))) << "auth errors are final";
  std::cout << "wrong secret: " << st << "\n";

  config.access_key_id = "GPUCTLUNKNOWNKEY";
  client = Client(config);
  ASSERT_NE(client, nullptr);
  st = client->HeadObject(prefix_ + "/denied").status();
  EXPECT_FALSE(st.ok());
  st = client->PutObject(prefix_ + "/denied", "x");
  EXPECT_TRUE(absl::IsUnauthenticated(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("InvalidAccessKeyId"));
  std::cout << "unknown key: " << st << "\n";
}

TEST_F(RadosgwTest, CredentialsFromASharedCredentialsFile) {
  S3Config config = config_;
  config.credentials_file = dir_ + "/credentials";
  config.profile = "gpuctl";
  std::ofstream(config.credentials_file)
      << "[default]\naws_access_key_id = nobody\naws_secret_access_key = nothing\n"
      << "[gpuctl]\naws_access_key_id = " << Env("AWS_ACCESS_KEY_ID")
      << "\naws_secret_access_key = " << Env("AWS_SECRET_ACCESS_KEY") << "\n";
  auto client = Client(config);
  ASSERT_NE(client, nullptr);
  const std::string key = prefix_ + "/from-file";
  ASSERT_TRUE(client->PutObject(key, "f").ok());
  ASSERT_TRUE(client->DeleteObject(key).ok());
}

TEST_F(RadosgwTest, ConcurrentUploadsAndDownloads) {
  auto client = Client(config_);
  ASSERT_NE(client, nullptr);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 4 && errors[t].empty(); ++i) {
        std::string key = absl::StrCat(prefix_, "/concurrent/", t, "-", i);
        std::string data = Incompressible(64 * 1024 + t * 1000 + i);
        absl::Status st = client->PutObject(key, data);
        auto got = st.ok() ? Get(*client, key) : absl::StatusOr<std::string>(st);
        if (!got.ok()) {
          errors[t] = got.status().ToString();
        } else if (*got != data) {
          errors[t] = "content differs for " + key;
        } else if (absl::Status del = client->DeleteObject(key); !del.ok()) {
          errors[t] = del.ToString();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

}  // namespace
}  // namespace gpuctl::s3
