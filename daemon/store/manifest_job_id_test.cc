#include "daemon/store/manifest_job_id.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "google/protobuf/util/json_util.h"
#include "gpuctl/v1/manifest.pb.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

// UTF-8 of one code point (not a surrogate).
std::string Utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
  } else if (cp < 0x10000) {
    out = {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
           static_cast<char>(0x80 | (cp & 0x3F))};
  } else {
    out = {static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
           static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
  }
  return out;
}

TEST(ManifestJobIdTest, AgreesWithTheProtobufJsonMapping) {
  absl::BitGen gen;
  std::vector<std::string> jobs = {"",           "42",
                                   "a\"b\\c/d",  "tab\tnl\n\x01\x1f",
                                   "<tag>&a=b'", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
                                   "\x7f"};
  for (int i = 0; i < 300; ++i) {
    std::string job;
    int n = absl::Uniform(gen, 0, 12);
    for (int k = 0; k < n; ++k) {
      uint32_t cp = absl::Bernoulli(gen, 0.5) ? absl::Uniform<uint32_t>(gen, 1, 0x80)
                                              : absl::Uniform<uint32_t>(gen, 0x80, 0x10FFFF);
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
      job += Utf8(cp);
    }
    jobs.push_back(job);
  }
  for (const std::string& job : jobs) {
    v1::TraceManifest m;
    m.set_trace_id("0190c3a2-7b1e-7c4d-9a2b-3c4d5e6f7a8b");
    m.set_host("h");
    m.set_job_id(job);
    m.add_results()->set_job_id("nested " + job);
    m.mutable_clock()->mutable_offset()->set_seconds(-3);
    for (bool proto_names : {true, false}) {
      google::protobuf::util::JsonPrintOptions options;
      options.add_whitespace = proto_names;
      options.preserve_proto_field_names = proto_names;
      std::string json;
      ASSERT_TRUE(google::protobuf::util::MessageToJsonString(m, &json, options).ok());
      auto got = ManifestJobId(json);
      ASSERT_TRUE(got.ok()) << got.status() << " in " << json;
      EXPECT_EQ(*got, job) << json;
    }
  }
}

TEST(ManifestJobIdTest, TakesTheTopLevelKeyAndSkipsEverythingElse) {
  EXPECT_EQ(*ManifestJobId(R"({"results": [{"job_id": "inner"}, [1, [2]], {}],
      "x": {"job_id": "deep", "y": {"jobId": "deeper"}}, "n": -1.5e3, "t": true,
      "f": false, "z": null, "s": "job_id", "job_id": "top", "after": })"),
            "top");
  EXPECT_EQ(*ManifestJobId(R"({"results": [{"job_id": "inner"}]})"), "");
  EXPECT_EQ(*ManifestJobId(" { } "), "");
  EXPECT_EQ(*ManifestJobId(R"({"jobId": null})"), "");
  EXPECT_EQ(*ManifestJobId(R"({"jobId":"\u00e9\ud83d\ude00\/"})"), "\xc3\xa9\xf0\x9f\x98\x80/");
}

TEST(ManifestJobIdTest, RejectsWhatIsNotAJsonObject) {
  for (const char* bad :
       {"", "[]", "{", "{\"a\" 1}", "{\"job_id\": 5}", "{\"a\": }", "{\"job_id\": \"open",
        "{\"a\": \"\\x\"}", "{\"job_id\": \"\\ud800\"}", "{\"job_id\": \"\\udc00\"}",
        "{\"job_id\": \"\\u12\"}", "{\"a\": 1 \"b\": 2}", "{\"a\": [1, }", "{\"a\": \"x\ny\"}"}) {
    EXPECT_FALSE(ManifestJobId(bad).ok()) << bad;
  }
  std::string deep = "{\"a\": " + std::string(200, '[') + std::string(200, ']') + "}";
  EXPECT_FALSE(ManifestJobId(deep).ok());
  std::string fine =
      "{\"a\": " + std::string(50, '[') + std::string(50, ']') + ", \"job_id\": \"j\"}";
  EXPECT_EQ(*ManifestJobId(fine), "j");
}

}  // namespace
}  // namespace gpuctl::daemon
