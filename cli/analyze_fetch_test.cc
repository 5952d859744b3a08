// `gpuctl analyze --trace-id` / `--since --job` against fake daemons over a
// real socket: the listing merged across hosts and cut at the window, and
// a trace fetched from the hosts that have it, the others named.
#include "cli/analyze_fetch.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cli/cli.h"
#include "cli/exit_codes.h"
#include "cli/fake_gpuctl_service_test_util.h"
#include "daemon/analysis/testing/trace_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::cli {
namespace {

using ::gpuctl::cli::testing::DeadTarget;
using ::gpuctl::cli::testing::FakeServer;
using ::gpuctl::cli::testing::TestConsole;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kTraceId[] = "0190c3a2-7b1e-7c4d-9a2b-3c4d5e6f7a8b";

v1::TraceManifest Listed(const std::string& id, int64_t created_s) {
  v1::TraceManifest m;
  m.set_trace_id(id);
  m.set_job_id("42");
  m.mutable_created_at()->set_seconds(created_s);
  m.mutable_trigger()->set_kind(v1::TRIGGER_KIND_SCHEDULED);
  return m;
}

TEST(AnalyzeFetchTest, HostLabelIsADirectoryName) {
  EXPECT_EQ(HostLabel("10.0.0.7:7070"), "10.0.0.7_7070");
  EXPECT_EQ(HostLabel("[fd00::7]:7070"), "_fd00__7__7070");
  EXPECT_EQ(HostLabel(".."), "host..");
  EXPECT_EQ(HostLabel("node-1.example:7070"), "node-1.example_7070");
}

TEST(AnalyzeFetchTest, JobTracesAreMergedByIdNewestFirstAndPagingStopsAtTheWindow) {
  FakeServer a, b;
  auto& pages_a = a.service().trace_pages;
  *pages_a[""].add_traces() = Listed("t3", 1000);
  *pages_a[""].add_traces() = Listed("t2", 900);
  pages_a[""].set_next_page_token("p2");
  *pages_a["p2"].add_traces() = Listed("t1", 100);  // before the window: the end
  pages_a["p2"].set_next_page_token("p3");
  *pages_a["p3"].add_traces() = Listed("never-asked", 2000);
  *b.service().trace_pages[""].add_traces() = Listed("t3", 1001);
  *b.service().trace_pages[""].add_traces() = Listed("t4", 950);

  TestConsole console;
  FetchSettings settings;
  settings.hosts = {{a.target(), ""}, {b.target(), ""}, {DeadTarget(), ""}};
  const TraceListing listing = ListJobTraces("42", v1::TRIGGER_KIND_SCHEDULED,
                                             absl::FromUnixSeconds(500), settings, console.env());
  std::vector<std::string> ids;
  for (const ListedTrace& t : listing.traces) ids.push_back(t.trace_id);
  EXPECT_THAT(ids, ElementsAre("t3", "t4", "t2"));
  ASSERT_EQ(listing.traces[0].hosts.size(), 2u);
  EXPECT_EQ(listing.traces[0].hosts[1].target, b.target());
  EXPECT_EQ(listing.traces[0].created, absl::FromUnixSeconds(1000));  // the earliest host's
  ASSERT_EQ(listing.failed.size(), 1u);
  EXPECT_EQ(listing.failed[0].target, settings.hosts[2].target);

  const std::vector<v1::ListTracesRequest> asked = a.service().list_traces_requests();
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[0].job_id(), "42");
  EXPECT_EQ(asked[0].trigger(), v1::TRIGGER_KIND_SCHEDULED);
}

TEST(AnalyzeFetchTest, TraceIdIsFetchedFromTheHostsThatHaveItAndTheOthersNamed) {
  analysis::testing::TraceBuilder trace;
  trace.Gpuctl({});
  trace.Kernel("gemm", 1'000'000, 100'000, 1);
  FakeServer has, lacks;
  has.service().files[kTraceId]["node1-rank0-pid7.json"] = trace.Json();
  const std::string dead = DeadTarget();

  TestConsole console;
  const int code = RunCli({"analyze", "--json", "--trace-id", kTraceId, "--host", has.target(),
                           "--host", lacks.target()},
                          console.env());
  ASSERT_EQ(code, kExitOk) << console.err.str();
  EXPECT_THAT(console.err.str(),
              HasSubstr(absl::StrCat("no trace ", kTraceId, " on ", lacks.target())));
  const nlohmann::json doc = nlohmann::json::parse(console.out.str());
  ASSERT_EQ(doc["traces"].size(), 1u);
  const std::string file = doc["traces"][0]["file"];
  // Named within the temporary directory, which is gone.
  EXPECT_EQ(file, absl::StrCat(HostLabel(has.target()), "/", kTraceId, "/node1-rank0-pid7.json"));
  EXPECT_EQ(doc["traces"][0]["top"]["kernels"][0]["name"], "gemm");

  TestConsole partial;
  EXPECT_EQ(RunCli({"analyze", "--trace-id", kTraceId, "--host", has.target(), "--host", dead},
                   partial.env()),
            kExitPartialFailure);
  EXPECT_THAT(partial.err.str(), HasSubstr(absl::StrCat("cannot reach gpuctld at ", dead)));
  EXPECT_THAT(partial.out.str(), HasSubstr("node1-rank0-pid7.json"));

  TestConsole nowhere;
  EXPECT_EQ(RunCli({"analyze", "--trace-id", kTraceId, "--host", lacks.target()}, nowhere.env()),
            kExitNothingMatched);
  TestConsole down;
  EXPECT_EQ(RunCli({"analyze", "--trace-id", kTraceId, "--host", dead}, down.env()),
            kExitDaemonError);
}

}  // namespace
}  // namespace gpuctl::cli
