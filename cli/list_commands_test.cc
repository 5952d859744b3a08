// traces, status and get against a fake gpuctld over a real socket (ps:
// fleet_ps_test.cc).
#include "cli/list_commands.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/cli.h"
#include "cli/exit_codes.h"
#include "cli/fake_gpuctl_service_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::cli {
namespace {

namespace fs = std::filesystem;
using ::gpuctl::cli::testing::FakeServer;
using ::gpuctl::cli::testing::TestConsole;
using ::testing::HasSubstr;
using ::testing::Not;

v1::TraceManifest Manifest(std::string id, int ok, int failed) {
  v1::TraceManifest m;
  m.set_trace_id(id);
  m.set_job_id("42");
  m.mutable_created_at()->set_seconds(1714566896);  // 2024-05-01 12:34:56 UTC
  m.set_location(absl::StrCat("/var/lib/gpuctl/traces/", id));
  for (int i = 0; i < ok + failed; ++i) {
    v1::ProcessResult* r = m.add_results();
    r->set_status(i < ok ? v1::CAPTURE_STATUS_OK : v1::CAPTURE_STATUS_FAILED);
    r->set_stored_bytes(i < ok ? 1024 : 0);
  }
  return m;
}

class CliListCommandsTest : public ::testing::Test {
 protected:
  int Run(std::vector<std::string> args) {
    args.push_back("--host");
    args.push_back(server_.target());
    return RunCli(args, console_.env());
  }
  FakeServer server_;
  TestConsole console_;
};

TEST_F(CliListCommandsTest, TracesFollowsPageTokens) {
  auto& pages = server_.service().trace_pages;
  *pages[""].add_traces() = Manifest("t3", 2, 0);
  pages[""].set_next_page_token("p2");
  *pages["p2"].add_traces() = Manifest("t2", 1, 1);
  pages["p2"].set_next_page_token("p3");
  *pages["p3"].add_traces() = Manifest("t1", 0, 1);
  ASSERT_EQ(Run({"traces", "--job", "42"}), kExitOk) << console_.err.str();
  const std::string out = console_.out.str();
  EXPECT_THAT(out, HasSubstr("TRACE ID  CREATED              JOB  PROCESSES     SIZE  STATE  "
                             "TRIGGER    LOCATION\n"));
  EXPECT_THAT(out, HasSubstr("t3        2024-05-01 12:34:56  42         2/2  2.0 KiB  -      "
                             "on-demand  /var/lib/gpuctl/traces/t3\n"));
  EXPECT_THAT(out, HasSubstr("t2        2024-05-01 12:34:56  42         1/2"));
  EXPECT_THAT(out, HasSubstr("t1        2024-05-01 12:34:56  42         0/1      0 B"));
  std::vector<v1::ListTracesRequest> requests = server_.service().list_traces_requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[1].page_token(), "p2");
  EXPECT_EQ(requests[2].page_token(), "p3");
  EXPECT_EQ(requests[2].job_id(), "42");
}

TEST_F(CliListCommandsTest, TracesInTheBucketAreAskedForWithTheirDays) {
  *server_.service().trace_pages[""].add_traces() = Manifest("t3", 1, 0);
  ASSERT_EQ(Run({"traces", "--bucket", "--days", "30"}), kExitOk) << console_.err.str();
  std::vector<v1::ListTracesRequest> requests = server_.service().list_traces_requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_TRUE(requests[0].bucket());
  EXPECT_EQ(requests[0].bucket_days(), 30u);
  EXPECT_THAT(console_.out.str(), HasSubstr("t3 "));
  // Without --bucket, the daemon's own store.
  ASSERT_EQ(Run({"traces"}), kExitOk) << console_.err.str();
  EXPECT_FALSE(server_.service().list_traces_requests().back().bucket());
  EXPECT_EQ(Run({"traces", "--days", "3"}), kExitUsage);
  EXPECT_THAT(console_.err.str(), HasSubstr("--days goes with --bucket"));
  EXPECT_EQ(Run({"traces", "--bucket", "--days", "400"}), kExitUsage);
}

TEST_F(CliListCommandsTest, TracesShowWhereEachTraceIsStored) {
  auto& page = server_.service().trace_pages[""];
  v1::TraceManifest uploaded = Manifest("t3", 1, 0);
  uploaded.set_location("s3://traces/gp/2024/05/01/t3/");
  uploaded.mutable_storage()->set_state(v1::STORAGE_STATE_UPLOADED);
  uploaded.mutable_storage()->set_remote_location("s3://traces/gp/2024/05/01/t3/");
  *page.add_traces() = uploaded;
  v1::TraceManifest pending = Manifest("t2", 1, 0);
  pending.mutable_storage()->set_state(v1::STORAGE_STATE_UPLOAD_PENDING);
  pending.mutable_storage()->set_upload_error("S3 PutObject failed: HTTP 503");
  *page.add_traces() = pending;
  v1::TraceManifest local = Manifest("t1", 1, 0);
  local.mutable_storage()->set_state(v1::STORAGE_STATE_LOCAL);
  *page.add_traces() = local;
  ASSERT_EQ(Run({"traces"}), kExitOk) << console_.err.str();
  const std::string out = console_.out.str();
  EXPECT_THAT(out, HasSubstr("1/1  1.0 KiB  uploaded  on-demand  s3://traces/gp/2024/05/01/t3/\n"));
  EXPECT_THAT(out, HasSubstr("1/1  1.0 KiB  pending   on-demand  /var/lib/gpuctl/traces/t2\n"));
  EXPECT_THAT(out, HasSubstr("1/1  1.0 KiB  local     on-demand  /var/lib/gpuctl/traces/t1\n"));

  TestConsole json_console;
  ASSERT_EQ(RunCli({"traces", "--json", "--host", server_.target()}, json_console.env()), kExitOk);
  nlohmann::json json = nlohmann::json::parse(json_console.out.str());
  ASSERT_EQ(json["traces"].size(), 3u);
  EXPECT_EQ(json["traces"][0]["storage"]["state"], "STORAGE_STATE_UPLOADED");
  EXPECT_EQ(json["traces"][0]["storage"]["remoteLocation"], "s3://traces/gp/2024/05/01/t3/");
  EXPECT_EQ(json["traces"][1]["storage"]["state"], "STORAGE_STATE_UPLOAD_PENDING");
  EXPECT_EQ(json["traces"][1]["storage"]["uploadError"], "S3 PutObject failed: HTTP 503");
  EXPECT_EQ(json["traces"][2]["storage"]["state"], "STORAGE_STATE_LOCAL");
}

// The trigger column names the rule of a scheduled trace; --trigger asks
// the daemon to filter, and filters what a daemon that does not (an older
// one, like this fake) lists anyway.
TEST_F(CliListCommandsTest, TracesShowAndFilterTheirTrigger) {
  auto& page = server_.service().trace_pages[""];
  v1::TraceManifest scheduled = Manifest("t3", 1, 0);
  scheduled.mutable_trigger()->set_kind(v1::TRIGGER_KIND_SCHEDULED);
  scheduled.mutable_trigger()->mutable_scheduled()->set_rule("hourly");
  *page.add_traces() = scheduled;
  v1::TraceManifest asked = Manifest("t2", 1, 0);
  asked.mutable_trigger()->set_kind(v1::TRIGGER_KIND_ON_DEMAND);
  asked.mutable_trigger()->set_requested_by("ipv4:10.0.0.5:51234");
  *page.add_traces() = asked;
  *page.add_traces() = Manifest("t1", 1, 0);  // an older daemon's: no trigger
  ASSERT_EQ(Run({"traces"}), kExitOk) << console_.err.str();
  EXPECT_THAT(console_.out.str(), HasSubstr("scheduled:hourly  /var/lib/gpuctl/traces/t3\n"));
  EXPECT_THAT(console_.out.str(), HasSubstr("on-demand         /var/lib/gpuctl/traces/t2\n"));

  TestConsole only_scheduled;
  ASSERT_EQ(RunCli({"traces", "--trigger", "scheduled", "--host", server_.target()},
                   only_scheduled.env()),
            kExitOk);
  EXPECT_THAT(only_scheduled.out.str(), HasSubstr("t3 "));
  EXPECT_THAT(only_scheduled.out.str(), Not(HasSubstr("t2 ")));
  EXPECT_EQ(server_.service().list_traces_requests().back().trigger(), v1::TRIGGER_KIND_SCHEDULED);

  TestConsole only_asked;
  ASSERT_EQ(
      RunCli({"traces", "--trigger", "on-demand", "--host", server_.target()}, only_asked.env()),
      kExitOk);
  EXPECT_THAT(only_asked.out.str(), Not(HasSubstr("t3 ")));
  EXPECT_THAT(only_asked.out.str(), HasSubstr("t2 "));
  EXPECT_THAT(only_asked.out.str(), HasSubstr("t1 "));

  TestConsole none;
  ASSERT_EQ(RunCli({"traces", "--trigger", "anomaly", "--host", server_.target()}, none.env()),
            kExitOk);
  EXPECT_THAT(none.err.str(), HasSubstr("no anomaly traces stored by gpuctld at"));

  TestConsole bad;
  EXPECT_EQ(RunCli({"traces", "--trigger", "sched", "--host", server_.target()}, bad.env()),
            kExitUsage);
  EXPECT_THAT(bad.err.str(),
              HasSubstr("--trigger: \"sched\" is not scheduled, anomaly or on-demand"));
}

v1::TraceManifest Cancelled(v1::TraceManifest m) {
  m.set_status(v1::TRACE_STATUS_CANCELLED);
  m.mutable_cancellation()->set_reason("the caller cancelled its Trace call (Ctrl-C)");
  m.mutable_cancellation()->set_cancelled_by("ipv4:10.0.0.5:51234");
  m.mutable_cancellation()->mutable_cancelled_at()->set_seconds(1714566900);
  return m;
}

TEST_F(CliListCommandsTest, TracesSayWhichWereCancelledByWhomAndWhy) {
  auto& page = server_.service().trace_pages[""];
  *page.add_traces() = Cancelled(Manifest("t2", 0, 2));
  v1::TraceManifest done = Manifest("t1", 1, 0);
  done.set_status(v1::TRACE_STATUS_COMPLETED);
  *page.add_traces() = done;
  ASSERT_EQ(Run({"traces"}), kExitOk) << console_.err.str();
  const std::string out = console_.out.str();
  EXPECT_THAT(out, HasSubstr("0/2      0 B  -      on-demand  /var/lib/gpuctl/traces/t2\n"
                             "    cancelled at 2024-05-01 12:35:00 by ipv4:10.0.0.5:51234: the "
                             "caller cancelled its Trace call (Ctrl-C)\n"
                             "t1 "));
  EXPECT_EQ(out.find("cancelled"), out.rfind("cancelled at"));  // t1 has no note

  TestConsole json_console;
  ASSERT_EQ(RunCli({"traces", "--json", "--host", server_.target()}, json_console.env()), kExitOk);
  nlohmann::json json = nlohmann::json::parse(json_console.out.str());
  EXPECT_EQ(json["traces"][0]["status"], "TRACE_STATUS_CANCELLED");
  EXPECT_EQ(json["traces"][0]["cancellation"]["cancelledBy"], "ipv4:10.0.0.5:51234");
  EXPECT_EQ(json["traces"][0]["cancellation"]["reason"],
            "the caller cancelled its Trace call (Ctrl-C)");
  EXPECT_EQ(json["traces"][0]["cancellation"]["cancelledAt"], "2024-05-01T12:35:00Z");
  EXPECT_EQ(json["traces"][1]["status"], "TRACE_STATUS_COMPLETED");
}

void SetSummary(v1::ProcessResult* r, int rank, int64_t busy_ms, int64_t p50_ms, int64_t p99_ms,
                const std::string& top, int64_t top_ms) {
  constexpr int64_t kMs = 1'000'000;
  r->set_rank(rank);
  v1::ProcessSummary* s = r->mutable_summary();
  s->set_gpu_span_ns(1000 * kMs);
  s->set_compute_ns((busy_ms - 20) * kMs);
  s->set_memory_ns(20 * kMs);
  s->set_idle_ns((1000 - busy_ms) * kMs);
  s->set_steps(10);
  s->set_step_p50_ns(p50_ms * kMs);
  s->set_step_p99_ns(p99_ms * kMs);
  s->set_top_kernel(top);
  s->set_top_kernel_ns(top_ms * kMs);
}

TEST_F(CliListCommandsTest, TracesShowTheIngestSummaryUnderTheRow) {
  auto& page = server_.service().trace_pages[""];
  v1::TraceManifest two = Cancelled(Manifest("t3", 2, 0));
  SetSummary(two.mutable_results(0), 0, 720, 181, 240, "gemm_fwd", 400);
  SetSummary(two.mutable_results(1), 1, 612, 185, 250, "gemm_fwd", 300);
  *page.add_traces() = two;
  v1::TraceManifest long_name = Manifest("t2", 1, 0);
  SetSummary(long_name.mutable_results(0), 0, 500, 90, 90, std::string(200, 'k'), 250);
  *page.add_traces() = long_name;
  v1::TraceManifest broken = Manifest("t0", 1, 0);  // numbers no conversion gives: left out
  SetSummary(broken.mutable_results(0), 0, 500, 90, 90, "gemm", 250);
  broken.mutable_results(0)->mutable_summary()->set_gpu_span_ns(-1);
  *page.add_traces() = broken;
  *page.add_traces() = Manifest("t1", 1, 0);  // from a daemon that stored no summary
  ASSERT_EQ(Run({"traces"}), kExitOk) << console_.err.str();
  const std::string out = console_.out.str();
  // Busy over both spans (1332 of 2000 ms), the least busy process named;
  // the slowest process's steps; gemm_fwd's 700 ms of the 1332 ms busy.
  EXPECT_THAT(out, HasSubstr("/var/lib/gpuctl/traces/t3\n"
                             "    cancelled at 2024-05-01 12:35:00 by ipv4:10.0.0.5:51234: the "
                             "caller cancelled its Trace call (Ctrl-C)\n"
                             "    GPU busy 67% (min 61% rank 1), step p50 185 ms p99 250 ms, "
                             "top gemm_fwd 53%\n"));
  EXPECT_THAT(out, HasSubstr("/var/lib/gpuctl/traces/t2\n"
                             "    GPU busy 50%, step p50 90.0 ms p99 90.0 ms, top kkkk"));
  EXPECT_THAT(out, HasSubstr("k... 50%\n"));
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::StartsWith(line, "    GPU busy")) {
      EXPECT_LE(line.size(), 100u) << line;
    }
  }
  EXPECT_THAT(out, HasSubstr("/var/lib/gpuctl/traces/t0\nt1 "));
  EXPECT_THAT(out, HasSubstr("/var/lib/gpuctl/traces/t1\n"));
  EXPECT_EQ(out.find("/var/lib/gpuctl/traces/t1\n") + 26, out.size());  // no line under t1
}

TEST_F(CliListCommandsTest, TracesLimitStopsPaging) {
  auto& pages = server_.service().trace_pages;
  *pages[""].add_traces() = Manifest("t4", 1, 0);
  *pages[""].add_traces() = Manifest("t3", 1, 0);
  pages[""].set_next_page_token("p2");
  *pages["p2"].add_traces() = Manifest("t2", 1, 0);
  *pages["p2"].add_traces() = Manifest("t1", 1, 0);
  pages["p2"].set_next_page_token("p3");
  ASSERT_EQ(Run({"traces", "--limit", "3", "--json"}), kExitOk) << console_.err.str();
  nlohmann::json json = nlohmann::json::parse(console_.out.str());
  ASSERT_EQ(json["traces"].size(), 3u);
  EXPECT_EQ(json["traces"][2]["traceId"], "t2");
  std::vector<v1::ListTracesRequest> requests = server_.service().list_traces_requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].page_size(), 3);
  EXPECT_EQ(requests[1].page_size(), 1);
}

TEST_F(CliListCommandsTest, TracesRepeatedTokenStops) {
  auto& pages = server_.service().trace_pages;
  *pages[""].add_traces() = Manifest("t1", 1, 0);
  pages[""].set_next_page_token("loop");
  *pages["loop"].add_traces() = Manifest("t0", 1, 0);
  pages["loop"].set_next_page_token("loop");
  EXPECT_EQ(Run({"traces"}), kExitDaemonError);
  EXPECT_THAT(console_.err.str(), HasSubstr("repeated a page token"));
}

TEST_F(CliListCommandsTest, StatusShowsTheKinetoBridge) {
  v1::KinetoBridgeStatus* k = server_.service().status.mutable_kineto();
  k->set_mode("auto");
  k->set_state("partial");
  k->set_socket_path("/run/gpuctl/kineto/dynolog");
  k->set_processes(3);
  k->set_message("another daemon (dynolog?) holds the abstract name");
  ASSERT_EQ(Run({"status"}), kExitOk);
  EXPECT_THAT(console_.out.str(),
              HasSubstr("kineto bridge       auto, partial: /run/gpuctl/kineto/dynolog, 3 "
                        "processes (another daemon (dynolog?) holds the abstract name)\n"));
}

TEST_F(CliListCommandsTest, Status) {
  v1::GetStatusResponse& s = server_.service().status;
  s.set_host("node1");
  s.set_daemon_version("0.1.0");
  s.set_listen_address("127.0.0.1:7070");
  s.set_socket_path("/run/gpuctl/gpuctl.sock");
  s.set_attached_processes(8);
  s.set_ipc_protocol_major(1);
  s.mutable_max_duration()->set_seconds(600);
  ASSERT_EQ(Run({"status"}), kExitOk);
  const std::string out = console_.out.str();
  EXPECT_THAT(out, Not(HasSubstr("FIELD")));
  EXPECT_THAT(out, HasSubstr("host                node1\n"));
  EXPECT_THAT(out, HasSubstr("attached processes  8\n"));
  EXPECT_THAT(out, HasSubstr("ipc protocol        1.0\n"));
  EXPECT_THAT(out, HasSubstr("max duration        10m\n"));
  EXPECT_THAT(out, HasSubstr("store               -\n"));
  EXPECT_THAT(out, Not(HasSubstr("kineto")));

  TestConsole json_console;
  EXPECT_EQ(RunCli({"status", "--json", "--host", server_.target()}, json_console.env()), kExitOk);
  EXPECT_EQ(nlohmann::json::parse(json_console.out.str())["maxDuration"], "600s");
}

TEST_F(CliListCommandsTest, ErrorsMapToExitCodes) {
  server_.service().unary_error = grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "token required");
  EXPECT_EQ(Run({"ps"}), kExitDaemonError);
  EXPECT_THAT(console_.err.str(),
              HasSubstr("rejected the credentials (UNAUTHENTICATED): token required; pass the "
                        "daemon's token with --token-file"));
  EXPECT_EQ(console_.out.str(), "");
  EXPECT_EQ(Run({"status"}), kExitDaemonError);
  EXPECT_EQ(Run({"traces"}), kExitDaemonError);
}

constexpr char kGetTraceId[] = "0190c3a2-7b1e-7c4d-9a2b-3c4d5e6f7a8b";

class CliGetCommandTest : public CliListCommandsTest {
 protected:
  CliGetCommandTest() {
    std::string tmpl = (fs::temp_directory_path() / "gpuctl-get-test-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
  }
  ~CliGetCommandTest() override { fs::remove_all(dir_); }
  std::string ReadFile(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::string dir_;
};

TEST_F(CliGetCommandTest, DownloadsSelectedFiles) {
  server_.service().files[kGetTraceId] = {
      {"a.json.gz", std::string(1000, 'a')}, {"b.json.gz", "bbb"}, {"manifest.json", "{}"}};
  ASSERT_EQ(Run({"get", kGetTraceId, "-o", dir_, "--file", "b.json.gz", "--file", "manifest.json"}),
            kExitOk)
      << console_.err.str();
  const fs::path saved = fs::path(dir_) / kGetTraceId;
  EXPECT_EQ(ReadFile(saved / "b.json.gz"), "bbb");
  EXPECT_EQ(ReadFile(saved / "manifest.json"), "{}");
  EXPECT_FALSE(fs::exists(saved / "a.json.gz"));
  EXPECT_THAT(console_.out.str(),
              HasSubstr(absl::StrCat("trace ", kGetTraceId, " saved to ", saved.string())));
  ASSERT_EQ(server_.service().get_requests().size(), 1u);
  EXPECT_EQ(server_.service().get_requests()[0].files_size(), 2);
}

TEST_F(CliGetCommandTest, ACancelledTraceIsSavedAndSaidToBeCancelled) {
  server_.service().get_trace = [](const v1::GetTraceRequest&,
                                   grpc::ServerWriter<v1::TraceChunk>* writer) {
    v1::TraceChunk chunk;
    chunk.set_file("manifest.json");
    chunk.set_data("{}");
    chunk.set_file_size(2);
    chunk.set_trace_status(v1::TRACE_STATUS_CANCELLED);
    *chunk.mutable_cancellation() = Cancelled({}).cancellation();
    writer->Write(chunk);
    return grpc::Status::OK;
  };
  EXPECT_EQ(Run({"get", kGetTraceId, "-o", dir_}), kExitPartialFailure);
  EXPECT_EQ(ReadFile(fs::path(dir_) / kGetTraceId / "manifest.json"), "{}");
  EXPECT_EQ(console_.err.str(),
            absl::StrCat("gpuctl: trace ", kGetTraceId,
                         " was cancelled at 2024-05-01 12:35:00 by ipv4:10.0.0.5:51234: the "
                         "caller cancelled its Trace call (Ctrl-C)\n"));
}

TEST_F(CliGetCommandTest, UnknownTraceSaysSoAndNamesTheHost) {
  EXPECT_EQ(Run({"get", kGetTraceId, "-o", dir_}), kExitNothingMatched);
  EXPECT_EQ(console_.err.str(),
            absl::StrCat("gpuctl: no trace ", kGetTraceId, " on ", server_.target(), "\n"));
}

TEST_F(CliGetCommandTest, UnknownTraceNeverShowsTheDaemonsPaths) {
  // What an older gpuctld answered: its store's path.
  server_.service().get_trace = [](const v1::GetTraceRequest& request,
                                   grpc::ServerWriter<v1::TraceChunk>*) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("opening /var/lib/gpuctl/traces/", request.trace_id(),
                                     "/manifest.json: No such file or directory"));
  };
  EXPECT_EQ(Run({"get", kGetTraceId, "-o", dir_}), kExitNothingMatched);
  EXPECT_EQ(console_.err.str(),
            absl::StrCat("gpuctl: no trace ", kGetTraceId, " on ", server_.target(), "\n"));
}

TEST_F(CliGetCommandTest, AMissingFileNamesTheHostAndTheTracesFiles) {
  server_.service().get_trace = [](const v1::GetTraceRequest& request,
                                   grpc::ServerWriter<v1::TraceChunk>*) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("trace ", request.trace_id(),
                                     " has no file \"x.json\"; its files: manifest.json, a.json"));
  };
  EXPECT_EQ(Run({"get", kGetTraceId, "--file", "x.json", "-o", dir_}), kExitNothingMatched);
  EXPECT_EQ(console_.err.str(),
            absl::StrCat("gpuctl: trace ", kGetTraceId, " on ", server_.target(),
                         " has no file \"x.json\"; its files: manifest.json, a.json\n"));
}

TEST_F(CliGetCommandTest, AMalformedTraceIdIsAUsageError) {
  EXPECT_EQ(Run({"get", "nope", "-o", dir_}), kExitUsage);
  EXPECT_THAT(console_.err.str(), HasSubstr("get: \"nope\" is not a lowercase UUIDv7"));
  EXPECT_EQ(server_.service().calls(), 0);
}

TEST_F(CliGetCommandTest, UnreachableExitsFour) {
  std::string target;
  {
    FakeServer gone;
    target = gone.target();
  }
  EXPECT_EQ(RunCli({"get", kGetTraceId, "-o", dir_, "--host", target}, console_.env()),
            kExitDaemonError);
  EXPECT_THAT(console_.err.str(), HasSubstr("cannot reach gpuctld at"));
}

}  // namespace
}  // namespace gpuctl::cli
