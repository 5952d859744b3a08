#include "daemon/s3/trace_object_key.h"

#include "absl/random/random.h"
#include "absl/time/civil_time.h"
#include "daemon/common/trace_id.h"
#include "gtest/gtest.h"

namespace gpuctl::s3 {
namespace {

std::string IdAt(absl::Time t) {
  absl::BitGen gen;
  return GenerateTraceId(t, gen);
}

absl::Time Utc(int y, int m, int d, int hh, int mm, int ss, int ms = 0) {
  return absl::FromCivil(absl::CivilSecond(y, m, d, hh, mm, ss), absl::UTCTimeZone()) +
         absl::Milliseconds(ms);
}

TEST(TraceObjectKeyTest, DatesComeFromTheIdInUtc) {
  std::string id = IdAt(Utc(2024, 3, 9, 23, 59, 59, 999));
  auto key = TraceObjectKey("gpuctl/prod", id, "h1-rank0-pid5.json.gz");
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(*key, "gpuctl/prod/2024/03/09/" + id + "/h1-rank0-pid5.json.gz");

  // One millisecond later is the next day, month and year boundaries too.
  id = IdAt(Utc(2024, 12, 31, 23, 59, 59, 999) + absl::Milliseconds(1));
  key = TraceObjectKey("p", id, "manifest.json");
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(*key, "p/2025/01/01/" + id + "/manifest.json");
}

TEST(TraceObjectKeyTest, EmptyPrefixStartsAtTheYear) {
  std::string id = IdAt(Utc(1999, 1, 2, 3, 4, 5));
  auto key = TraceObjectKey("", id, "manifest.json");
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(*key, "1999/01/02/" + id + "/manifest.json");
  auto dir = TraceObjectPrefix("", id);
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(*dir, "1999/01/02/" + id + "/");
  EXPECT_EQ(TraceDayPrefix("", absl::CivilDay(1999, 1, 2)), "1999/01/02/");
  EXPECT_EQ(TraceDayPrefix("a/b", absl::CivilDay(2030, 11, 30)), "a/b/2030/11/30/");
}

TEST(TraceObjectKeyTest, RejectsBadInput) {
  std::string id = IdAt(Utc(2024, 1, 1, 0, 0, 0));
  EXPECT_FALSE(TraceObjectKey("p", "not-an-id", "f").ok());
  EXPECT_FALSE(TraceObjectKey("p", "018CC251-F47B-7000-8000-000000000000", "f").ok());
  for (const char* file : {"", ".hidden", "a/b", "..", "sp ace", "x\n"}) {
    EXPECT_FALSE(TraceObjectKey("p", id, file).ok()) << file;
  }
  // The one subdirectory is the manifests', and holds nothing else.
  for (const char* file :
       {"_gpuctl/", "_gpuctl/.json", "_gpuctl/.h1.json", "_gpuctl/h1", "_gpuctl/h1.json.gz",
        "_gpuctl/h1.txt", "_gpuctl/a/b.json", "_gpuctl/../h1.json", "_gpuctl//h1.json",
        "other/h1.json", "/_gpuctl/h1.json", "_gpuctl/h1.json/x", "h1-rank0-pid5.json.gz/x"}) {
    EXPECT_FALSE(TraceObjectKey("p", id, file).ok()) << file;
  }
  EXPECT_FALSE(TraceObjectKey("p", id, "_gpuctl/" + std::string(201, 'h') + ".json").ok());
  for (const char* prefix : {"/p", "p/", "a//b"}) {
    EXPECT_FALSE(TraceObjectKey(prefix, id, "f").ok()) << prefix;
  }
}

TEST(TraceObjectKeyTest, ParsesItsOwnKeys) {
  std::string id = IdAt(Utc(2024, 6, 15, 12, 0, 0));
  auto key = TraceObjectKey("gpuctl", id, "manifest.json");
  ASSERT_TRUE(key.ok());
  auto name = ParseTraceObjectKey("gpuctl", *key);
  ASSERT_TRUE(name.has_value());
  EXPECT_EQ(name->trace_id, id);
  EXPECT_EQ(name->file, "manifest.json");

  auto bare = TraceObjectKey("", id, "f.json.gz");
  ASSERT_TRUE(bare.ok());
  ASSERT_TRUE(ParseTraceObjectKey("", *bare).has_value());

  // A host's manifest, in the trace's one subdirectory.
  auto manifest = TraceObjectKey("gpuctl", id, "_gpuctl/node-1.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(*manifest, "gpuctl/2024/06/15/" + id + "/_gpuctl/node-1.json");
  auto host_manifest = ParseTraceObjectKey("gpuctl", *manifest);
  ASSERT_TRUE(host_manifest.has_value());
  EXPECT_EQ(host_manifest->trace_id, id);
  EXPECT_EQ(host_manifest->file, "_gpuctl/node-1.json");
  EXPECT_EQ(ParseTraceObjectKey("", *TraceObjectKey("", id, "_gpuctl/h.json"))->file,
            "_gpuctl/h.json");

  // Outside the layout.
  EXPECT_FALSE(ParseTraceObjectKey("other", *key).has_value());
  EXPECT_FALSE(ParseTraceObjectKey("gpu", *key).has_value());
  EXPECT_FALSE(ParseTraceObjectKey("gpuctl", "gpuctl/2024/06/15/" + id).has_value());
  EXPECT_FALSE(ParseTraceObjectKey("gpuctl", "gpuctl/2024/06/15/" + id + "/a/b").has_value());
  for (const char* file : {"_gpuctl/a/b.json", "_gpuctl/h.json.gz", "_gpuctl/", "other/h.json",
                           "_gpuctl/.h.json", "_gpuctl//h.json", "x/_gpuctl/h.json"}) {
    EXPECT_FALSE(ParseTraceObjectKey("gpuctl", "gpuctl/2024/06/15/" + id + "/" + file).has_value())
        << file;
  }
  // The date must be the id's.
  EXPECT_FALSE(
      ParseTraceObjectKey("gpuctl", "gpuctl/2024/06/16/" + id + "/manifest.json").has_value());
}

TEST(TraceObjectKeyTest, KeysSortByTraceTime) {
  std::string early = IdAt(Utc(2024, 9, 30, 10, 0, 0));
  std::string late = IdAt(Utc(2024, 10, 1, 9, 0, 0));
  EXPECT_LT(*TraceObjectKey("p", early, "f"), *TraceObjectKey("p", late, "f"));
}

}  // namespace
}  // namespace gpuctl::s3
