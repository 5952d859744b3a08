// `gpuctl analyze`: its flags and paths in process, and the real binary on
// the fixture trace directory (test/fixtures/analyze).
#include "cli/analyze_command.h"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/analysis/testing/trace_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kTraceDir =
    std::string(GPUCTL_ANALYZE_FIXTURE_DIR) + "/0190c0de-0000-7000-8000-000000000001";
const std::string kRank0 = kTraceDir + "/node1-rank0-pid4242.json.gz";
const std::string kRank1 = kTraceDir + "/node1-rank1-pid4243.json.gz";

struct Ran {
  int rc = -1;
  std::string out;
};

// Runs the gpuctl binary with `args` (shell words), stdout and stderr
// together.
Ran RunGpuctl(const std::string& args) {
  Ran run;
  const std::string command = std::string(GPUCTL_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) run.out.append(buf, n);
  const int status = pclose(pipe);
  run.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gpuctl-analyze-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(AnalyzeFlagsTest, ThresholdsConvertAndValidate) {
  AnalyzeFlags flags;
  flags.paths = {"x.json"};
  flags.small_kernel_us = "2.5";
  flags.min_pct = "5";
  flags.min_kernels = "10";
  absl::StatusOr<AnalyzeCommandOptions> options = ValidateAnalyzeFlags(flags);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->thresholds.small_kernel_ns, 2500);
  EXPECT_DOUBLE_EQ(options->thresholds.min_share, 0.05);
  EXPECT_EQ(options->thresholds.min_kernels, 10u);

  flags.min_pct = "200";
  absl::StatusOr<AnalyzeCommandOptions> bad = ValidateAnalyzeFlags(flags);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("--min-pct: expected a percentage from 0 to 100, got \"200\""));
  flags.min_pct = "-1";
  EXPECT_FALSE(ValidateAnalyzeFlags(flags).ok());

  flags.min_pct = "";
  flags.straggler_mad = "2.5";
  flags.straggler_pct = "10";
  flags.comm_wait_pct = "40";
  options = ValidateAnalyzeFlags(flags);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_DOUBLE_EQ(options->thresholds.straggler_mad, 2.5);
  EXPECT_DOUBLE_EQ(options->thresholds.straggler_share, 0.1);
  EXPECT_DOUBLE_EQ(options->thresholds.comm_wait_share, 0.4);
  flags.comm_wait_pct = "101";
  EXPECT_FALSE(ValidateAnalyzeFlags(flags).ok());
}

// Rank `rank` of a three-rank trace: per step a gemm, then an all-reduce
// that ends for every rank at 800 µs into the step; rank 2's gemm takes
// 700 µs against the others' 500 µs, so the others wait for it.
std::string StragglerRankTrace(int64_t rank) {
  constexpr int64_t kUs = 1000;
  const int64_t compute = (rank == 2 ? 700 : 500) * kUs;
  analysis::testing::TraceBuilder b;
  b.Gpuctl({.rank = rank});
  for (int64_t step = 0; step < 4; ++step) {
    const int64_t t0 = 100 * kUs + step * 1000 * kUs;
    b.Step(step, t0 - 50 * kUs, 900 * kUs);
    b.Runtime("cudaLaunchKernel", t0 - 20 * kUs, 5 * kUs, 10 + 2 * step);
    b.Kernel("gemm", t0, compute, 10 + 2 * step);
    b.Runtime("cudaLaunchKernel", t0 - 10 * kUs, 5 * kUs, 11 + 2 * step);
    b.Kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t0 + compute, 800 * kUs - compute,
             11 + 2 * step, 9);
  }
  return b.Json();
}

TEST(AnalyzeBinaryTest, RanksOfADirectoryAreComparedForStragglers) {
  TempDir dir;
  for (int64_t rank = 0; rank < 3; ++rank) {
    std::ofstream(absl::StrCat(dir.path(), "/node1-rank", rank, ".json"))
        << StragglerRankTrace(rank);
  }
  Ran run = RunGpuctl("analyze --json " + dir.path());
  ASSERT_EQ(run.rc, 0) << run.out;
  nlohmann::json doc = nlohmann::json::parse(run.out);
  ASSERT_EQ(doc["traces"].size(), 3u);
  const nlohmann::json& late = doc["traces"][2]["communication"]["across_ranks"];
  EXPECT_EQ(late["ranks"], 3);
  EXPECT_EQ(late["lateness_ns"]["p50"], 200000);
  EXPECT_EQ(late["arrival_straggler"], true);
  EXPECT_EQ(doc["traces"][0]["communication"]["across_ranks"]["waiting_ns"], 800000);
  std::vector<std::string> ids;
  for (const nlohmann::json& f : doc["findings"]) {
    if (f["id"] == "straggler_arrival" || f["id"] == "communication_waiting") {
      ids.push_back(absl::StrCat(f["id"].get<std::string>(), "@", f["rank"].get<int64_t>()));
    }
  }
  EXPECT_THAT(ids, ElementsAre("communication_waiting@0", "straggler_arrival@2"));

  // Equal ranks: no straggler, whatever the threshold.
  Ran text = RunGpuctl("analyze --straggler-mad 0 --straggler-pct 0 " + dir.path() +
                       "/node1-rank0.json " + dir.path() + "/node1-rank1.json");
  EXPECT_EQ(text.rc, 0) << text.out;
  EXPECT_THAT(text.out, HasSubstr("COMMUNICATION ACROSS RANKS (trace "));
  EXPECT_THAT(text.out, ::testing::Not(HasSubstr("straggler_")));
}

TEST(AnalyzeBinaryTest, ManifestNotesOfLateProcessesBecomeDataQualityFindings) {
  // A trace directory as gpuctld stores it: rank 1 opened its window 1.5 s
  // late, rank 2 joined after the request; rank 0 is on time. A broken
  // manifest beside them is said and skipped.
  TempDir dir;
  for (int64_t rank = 0; rank < 3; ++rank) {
    std::ofstream(absl::StrCat(dir.path(), "/node1-rank", rank, "-pid", 100 + rank, ".json"))
        << StragglerRankTrace(rank);
  }
  std::filesystem::create_directories(dir.path() + "/_gpuctl");
  std::ofstream(dir.path() + "/_gpuctl/node1.json") << R"({"traceId": "t", "host": "node1",
    "results": [
      {"pid": 100, "file": "node1-rank0-pid100.json", "lateStart": false},
      {"pid": 101, "file": "node1-rank1-pid101.json", "lateStart": true, "startSkew": "1.500s"},
      {"pid": 102, "file": "node1-rank2-pid102.json", "joinedLate": true}]})";
  std::ofstream(dir.path() + "/_gpuctl/node2.json") << "{not json";
  Ran run = RunGpuctl("analyze --json " + dir.path());
  ASSERT_EQ(run.rc, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("_gpuctl/node2.json: not a manifest"));
  const size_t json_at = run.out.rfind("\n{", run.out.find("\"schema\"")) + 1;
  nlohmann::json doc = nlohmann::json::parse(run.out.substr(json_at));
  std::vector<std::string> notes;
  for (const nlohmann::json& f : doc["findings"]) {
    if (f["id"] == "late_start" || f["id"] == "joined_late") {
      notes.push_back(absl::StrCat(f["id"].get<std::string>(), "@", f["rank"].get<int64_t>()));
      if (f["id"] == "late_start") {
        EXPECT_EQ(f["numbers"]["start_skew_ns"], 1.5e9) << f;
      }
    }
  }
  EXPECT_THAT(notes, ElementsAre("late_start@1", "joined_late@2"));

  // One file on its own is looked up in its directory's manifests too.
  Ran one = RunGpuctl("analyze " + dir.path() + "/node1-rank1-pid101.json");
  EXPECT_EQ(one.rc, 0) << one.out;
  EXPECT_THAT(one.out, HasSubstr("late_start"));
}

TEST(AnalyzeFlagsTest, DirectoryExpandsToItsTracesWithoutManifests) {
  absl::StatusOr<std::vector<std::string>> files = ExpandTracePaths({kTraceDir});
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre(kRank0, kRank1));

  TempDir empty;
  std::ofstream(empty.path() + "/manifest.json") << "{}";
  absl::StatusOr<std::vector<std::string>> none = ExpandTracePaths({empty.path()});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ExpandTracePaths({"/nonexistent"}).status().code(), absl::StatusCode::kNotFound);
}

TEST(AnalyzeBinaryTest, AnalyzesATraceDirectory) {
  Ran run = RunGpuctl("analyze " + kTraceDir);
  EXPECT_EQ(run.rc, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("node1-rank0-pid4242.json.gz"));
  EXPECT_THAT(run.out, HasSubstr("node1-rank1-pid4243.json.gz"));
  EXPECT_THAT(run.out, HasSubstr("host_bound_idle [rank 0] recoverable ~200 us"));
  EXPECT_THAT(run.out, HasSubstr("'DataLoader.__next__'"));
  EXPECT_THAT(run.out, ::testing::Not(HasSubstr("[rank 1]")));
}

TEST(AnalyzeBinaryTest, JsonOutput) {
  Ran run = RunGpuctl("analyze --json --min-pct 2 " + kRank0 + " " + kRank1);
  ASSERT_EQ(run.rc, 0) << run.out;
  nlohmann::json doc = nlohmann::json::parse(run.out);
  EXPECT_EQ(doc["schema"], "gpuctl.analyze/1");
  EXPECT_EQ(doc["options"]["min_share"], 0.02);
  ASSERT_EQ(doc["traces"].size(), 2u);
  EXPECT_EQ(doc["traces"][0]["gzip"], true);
  EXPECT_EQ(doc["traces"][0]["idle_gaps"]["host_bound"]["gpu_idle_ns"], 200000);
  EXPECT_EQ(doc["traces"][1]["gpu"]["idle_ns"], 0);
  EXPECT_EQ(doc["findings"][1]["id"], "host_bound_idle");
  EXPECT_EQ(doc["findings"][1]["recoverable_ns"], 200000);
  EXPECT_TRUE(doc["errors"].empty());
}

TEST(AnalyzeBinaryTest, TruncatedFileIsReportedOthersStillAnalysed) {
  TempDir dir;
  std::ifstream in(kRank0, std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = dir.path() + "/cut.json.gz";
  std::ofstream(cut, std::ios::binary) << gz.substr(0, gz.size() / 2);
  Ran run = RunGpuctl("analyze --jobs 2 " + cut + " " + kRank1);
  EXPECT_EQ(run.rc, 1) << run.out;
  EXPECT_THAT(run.out, HasSubstr(cut + ": "));
  EXPECT_THAT(run.out, HasSubstr("node1-rank1-pid4243.json.gz"));
}

TEST(AnalyzeBinaryTest, HtmlBesideJson) {
  TempDir dir;
  const std::string page = dir.path() + "/report.html";
  Ran run = RunGpuctl("analyze --json --html " + page + " " + kTraceDir);
  ASSERT_EQ(run.rc, 0) << run.out;
  nlohmann::json doc = nlohmann::json::parse(run.out);  // stdout is still the document
  EXPECT_EQ(doc["traces"].size(), 2u);
  std::ifstream in(page);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(html, HasSubstr("<g class=\"heat-row\" data-rank=\"1\""));
  EXPECT_THAT(html, HasSubstr("data-id=\"host_bound_idle\" data-rank=\"0\" "
                              "data-recoverable-ns=\"200000\""));
  // Only the report: the temporary it was written as is gone.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);

  Ran text = RunGpuctl("analyze --html " + page + " " + kRank1);
  EXPECT_EQ(text.rc, 0) << text.out;
  EXPECT_THAT(text.out, HasSubstr("HTML report: " + page + "\n"));
}

TEST(AnalyzeBinaryTest, HtmlPathThatCannotBeWrittenIsAUsageError) {
  TempDir dir;
  for (const std::string& path : {dir.path() + "/no/such/dir/r.html", dir.path()}) {
    Ran run = RunGpuctl(absl::StrCat("analyze --html ", path, " ", kTraceDir));
    EXPECT_EQ(run.rc, 2) << run.out;
    EXPECT_THAT(run.out, HasSubstr("--html: "));
    EXPECT_THAT(run.out, ::testing::Not(HasSubstr("TRACE")));  // nothing was analysed
  }
  Ran proc = RunGpuctl("analyze --html /proc/gpuctl-report.html " + kTraceDir);
  EXPECT_EQ(proc.rc, 2) << proc.out;
  EXPECT_THAT(proc.out, HasSubstr("gpuctl analyze: --html: "));
  EXPECT_EQ(RunGpuctl("analyze --html '' " + kTraceDir).rc, 2);
}

TEST(AnalyzeBinaryTest, UsageErrors) {
  EXPECT_EQ(RunGpuctl("analyze").rc, 2);
  EXPECT_EQ(RunGpuctl("analyze --small-kernel-pct x " + kRank0).rc, 2);
  EXPECT_EQ(RunGpuctl("analyze --jobs 0 " + kRank0).rc, 2);
  Ran missing = RunGpuctl("analyze /nonexistent/trace.json.gz");
  EXPECT_EQ(missing.rc, 3);
  EXPECT_THAT(missing.out, HasSubstr("/nonexistent/trace.json.gz: no such file"));
}

TEST(AnalyzeBinaryTest, FetchAndDiffFlagsThatDoNotGoTogetherAreUsageErrors) {
  const std::string id = "0190c3a2-7b1e-7c4d-9a2b-3c4d5e6f7a8b";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"analyze " + kRank0 + " --trace-id " + id, "two inputs"},
      {"analyze --since 1h", "--since needs --job"},
      {"analyze --job 42", "--job needs --since"},
      {"analyze --since 5 --job 42", "--since"},
      {"analyze --trace-id " + id + " --since 1h --job 4", "two inputs"},
      {"analyze --trace-id nope", "--trace-id"},
      {"analyze " + kRank0 + " --host 10.0.0.1", "--host applies to traces fetched"},
      {"analyze " + kRank0 + " --keep /tmp/x", "--keep applies"},
      {"analyze --diff " + kRank0, "--diff"},
      {"analyze --diff " + kRank0 + " trace:nope", "trace:ID"},
      {"analyze --top 3 " + kRank0, "--top goes with --diff"},
      {"analyze --since 1h --job 4 --html /tmp/x.html", "--html goes with"},
      {"analyze " + kRank0 + " --bucket", "--bucket goes with --trace-id or --since"},
      {"analyze --diff " + kRank0 + " " + kRank1 + " --bucket", "--bucket goes with"},
      {"analyze --since 367d --job 4", "longer than the 366d maximum"},
      {"analyze --since 2w --job 4", "unknown unit \"w\""},
  };
  for (const auto& [args, message] : cases) {
    Ran run = RunGpuctl(args);
    EXPECT_EQ(run.rc, 2) << args << "\n" << run.out;
    EXPECT_THAT(run.out, HasSubstr(message)) << args;
  }
}

TEST(AnalyzeBinaryTest, DiffWritesAnHtmlPage) {
  TempDir dir;
  const std::string page = dir.path() + "/diff.html";
  Ran run = RunGpuctl("analyze --diff " + kRank0 + " " + kRank1 + " --html " + page);
  ASSERT_EQ(run.rc, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("HTML report: " + page + "\n"));
  std::ifstream in(page);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(html, HasSubstr("<title>gpuctl analyze --diff</title>"));
  EXPECT_THAT(html, HasSubstr("<section id=\"diff-kernels\">"));
  Ran missing = RunGpuctl("analyze --diff " + kRank0 + " " + kRank1 + " --html " + dir.path() +
                          "/no/such/d.html");
  EXPECT_EQ(missing.rc, 2) << missing.out;
}

// The diff of the fixture's two ranks against each rank's own report.
TEST(AnalyzeBinaryTest, DiffOfTwoFilesComparesTheirReports) {
  Ran before = RunGpuctl("analyze --json " + kRank0);
  Ran after = RunGpuctl("analyze --json " + kRank1);
  ASSERT_EQ(before.rc, 0) << before.out;
  ASSERT_EQ(after.rc, 0) << after.out;
  const nlohmann::json b = nlohmann::json::parse(before.out)["traces"][0];
  const nlohmann::json a = nlohmann::json::parse(after.out)["traces"][0];

  Ran diff = RunGpuctl("analyze --json --diff " + kRank0 + " " + kRank1);
  ASSERT_EQ(diff.rc, 0) << diff.out;
  const nlohmann::json d = nlohmann::json::parse(diff.out);
  EXPECT_EQ(d["schema"], "gpuctl.analyze.diff/1");
  EXPECT_EQ(d["before"]["input"], kRank0);
  EXPECT_EQ(d["before"]["summary"]["gpu_span_ns"], b["gpu"]["span_ns"]);
  EXPECT_EQ(d["after"]["summary"]["idle_ns"], a["gpu"]["idle_ns"]);
  EXPECT_EQ(d["before"]["summary"]["steps"]["p50_ns"], b["step_ns"]["p50"]);
  EXPECT_EQ(d["after"]["summary"]["steps"]["p99_ns"], a["step_ns"]["p99"]);
  if (b["step_ns"]["p50"].get<int64_t>() > 0 && a["step_ns"]["p50"].get<int64_t>() > 0) {
    EXPECT_DOUBLE_EQ(d["step_p50_ratio"].get<double>(),
                     a["step_ns"]["p50"].get<double>() / b["step_ns"]["p50"].get<double>());
  }
  // A kernel in both top lists: its change is after - before.
  for (const nlohmann::json& kb : b["top"]["kernels"]) {
    for (const nlohmann::json& ka : a["top"]["kernels"]) {
      if (kb["name"] != ka["name"] || kb["total_ns"] == ka["total_ns"]) continue;
      bool listed = false;
      for (const nlohmann::json& c : d["kernels"]["changed"]) {
        if (c["name"] != kb["name"]) continue;
        listed = true;
        EXPECT_EQ(c["ns_before"], kb["total_ns"]);
        EXPECT_EQ(c["ns_after"], ka["total_ns"]);
      }
      EXPECT_TRUE(listed || d["kernels"]["changed_total"].get<size_t>() > 10) << kb["name"];
    }
  }

  // A side against itself: nothing changed.
  Ran same = RunGpuctl("analyze --json --diff " + kTraceDir + " " + kTraceDir);
  ASSERT_EQ(same.rc, 0) << same.out;
  const nlohmann::json s = nlohmann::json::parse(same.out);
  EXPECT_EQ(s["kernels"]["changed_total"], 0);
  EXPECT_EQ(s["kernels"]["appeared_total"], 0);
  EXPECT_EQ(s["kernels"]["disappeared_total"], 0);
  EXPECT_TRUE(s["findings_only_before"].empty());
  EXPECT_TRUE(s["findings_only_after"].empty());
  EXPECT_EQ(s["busy_pct_shift"], 0.0);

  Ran text = RunGpuctl("analyze --diff " + kRank0 + " " + kRank1);
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_THAT(text.out, HasSubstr("Step time"));
  for (size_t start = 0; start < text.out.size();) {
    const size_t end = text.out.find('\n', start);
    const size_t len = (end == std::string::npos ? text.out.size() : end) - start;
    EXPECT_LE(len, 100u) << text.out.substr(start, len);
    start = end == std::string::npos ? text.out.size() : end + 1;
  }
  Ran missing = RunGpuctl("analyze --diff /nonexistent " + kRank1);
  EXPECT_EQ(missing.rc, 3) << missing.out;
}

}  // namespace
}  // namespace gpuctl::cli
