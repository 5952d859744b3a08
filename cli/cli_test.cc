// `gpuctl trace` and usage handling, against a fake gpuctld over a real
// socket.
#include "cli/cli.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "cli/exit_codes.h"
#include "cli/fake_gpuctl_service_test_util.h"
#include "daemon/common/trace_id.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::cli {
namespace {

namespace fs = std::filesystem;
using ::google::protobuf::util::TimeUtil;
using ::gpuctl::cli::testing::FakeServer;
using ::gpuctl::cli::testing::ManualInterrupts;
using ::gpuctl::cli::testing::TestConsole;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "gpuctl-cli-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> ListDir(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

constexpr char kTraceId[] = "0190c3a2-7b1e-7c4d-9a2b-3c4d5e6f7a8b";

v1::ProcessInfo Process(int pid, int rank) { return testing::FakeProcess(pid, rank); }

v1::ProcessResult Result(int pid, int rank, v1::CaptureStatus status, std::string message = "") {
  return testing::FakeResult(pid, rank, status, std::move(message));
}

testing::FakeGpuctlService::TraceFn Script(const std::vector<v1::ProcessInfo>& processes,
                                           const std::vector<v1::ProcessResult>& results,
                                           bool complete = true) {
  return testing::ScriptedTrace(processes, results, complete);
}

absl::Time ToTime(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

class CliTraceCommandTest : public ::testing::Test {
 protected:
  int Run(const std::vector<std::string>& args) {
    CliEnv env = console_.env();
    env.interrupts = &interrupts_;
    begin_ = absl::Now();
    return RunCli(args, env);
  }
  std::vector<std::string> TraceArgs(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"trace",  "--job",          "42", "--duration", "2s",
                                     "--host", server_.target(), "-o", dir_.path(),  "--trace-id",
                                     kTraceId};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  void StoreFiles() {
    std::string binary;
    for (int i = 0; i < 300; ++i) binary.push_back(static_cast<char>(i * 37));
    files_ = {{"node1-rank0-pid100.json.gz", binary},
              {"node1-rank1-pid101.json.gz", std::string("\0\x1f\x8b", 3)},
              {"manifest.json", "{\"traceId\":\"T1\"}"}};
    server_.service().files[kTraceId] = files_;
  }

  FakeServer server_;
  TestConsole console_;
  ManualInterrupts interrupts_;
  TempDir dir_;
  std::map<std::string, std::string> files_;
  absl::Time begin_;  // when the last Run began
};

TEST_F(CliTraceCommandTest, HappyPathPrintsTableAndDownloadsExactBytes) {
  server_.service().trace =
      Script({Process(100, 0), Process(101, 1)},
             {Result(101, 1, v1::CAPTURE_STATUS_OK), Result(100, 0, v1::CAPTURE_STATUS_OK)});
  StoreFiles();

  ASSERT_EQ(Run(TraceArgs()), kExitOk) << console_.err.str();

  const std::string out = console_.out.str();
  const std::string host(server_.target().size(), ' ');
  EXPECT_THAT(out, HasSubstr(absl::StrCat("HOST", host.substr(4),
                                          "  PID  RANK  STATUS  EVENTS     BYTES  FILE\n")));
  EXPECT_THAT(out, HasSubstr(absl::StrCat(server_.target(),
                                          "  100     0  ok        1100  12.3 KiB  "
                                          "node1-rank0-pid100.json.gz")));
  EXPECT_LT(out.find("pid100"), out.find("pid101"));  // rank order
  const fs::path saved = fs::path(dir_.path()) / kTraceId;
  EXPECT_THAT(out, HasSubstr(absl::StrCat("trace ", kTraceId, " saved to ", saved.string())));
  EXPECT_THAT(out, HasSubstr(absl::StrCat("/var/lib/gpuctl/traces/", kTraceId)));
  for (const auto& [name, data] : files_) EXPECT_EQ(ReadFile(saved / name), data) << name;
  EXPECT_EQ(ListDir(saved).size(), files_.size());  // no temporaries left
  // It ends saying how to open the files.
  EXPECT_THAT(out, ::testing::EndsWith("open a file in https://ui.perfetto.dev (Open trace file) "
                                       "or chrome://tracing (Load)\n"));

  const std::string err = console_.err.str();
  EXPECT_THAT(err, HasSubstr(absl::StrCat("trace ", kTraceId,
                                          ": 2 processes selected on node1, window 2s")));
  EXPECT_THAT(err, HasSubstr("pid 100: capturing"));
  EXPECT_THAT(err, HasSubstr("pid 101: ok, 1101 events, 12.3 KiB"));

  std::vector<v1::TraceRequest> requests = server_.service().trace_requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].selector().job_id(), "42");
  EXPECT_EQ(requests[0].duration().seconds(), 2);
  EXPECT_EQ(requests[0].trace_id(), kTraceId);
  EXPECT_EQ(requests[0].iterations(), 0u);
  // One host and no --start-delay: no instant, so the daemon's start delay
  // applies.
  EXPECT_FALSE(requests[0].has_start_time());
  ASSERT_TRUE(requests[0].has_caller_time());
  EXPECT_EQ(requests[0].max_start_skew().nanos(), 50000000);
  EXPECT_EQ(requests[0].max_start_skew().seconds(), 0);
  ASSERT_EQ(server_.service().get_requests().size(), 1u);
  EXPECT_EQ(server_.service().get_requests()[0].files_size(), 0);
}

TEST_F(CliTraceCommandTest, PassesPidsFractionalDurationAndTraceId) {
  server_.service().trace = Script({Process(7, -1)}, {Result(7, -1, v1::CAPTURE_STATUS_OK)});
  ASSERT_EQ(Run({"trace", "--pid", "7,8", "--pid", "9", "--duration", "1.5s", "--host",
                 server_.target(), "--no-download"}),
            kExitOk)
      << console_.err.str();
  std::vector<v1::TraceRequest> requests = server_.service().trace_requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_THAT(requests[0].selector().pids(), ElementsAre(7, 8, 9));
  EXPECT_EQ(requests[0].selector().job_id(), "");
  EXPECT_FALSE(requests[0].selector().allow_multiple_jobs());
  EXPECT_EQ(requests[0].duration().seconds(), 1);
  EXPECT_EQ(requests[0].duration().nanos(), 500000000);
  // A new UUIDv7, made by the CLI.
  const std::string id = requests[0].trace_id();
  EXPECT_TRUE(IsValidTraceId(id)) << id;
  EXPECT_LE(absl::Now() - *TraceIdTime(id), absl::Minutes(1));
  EXPECT_TRUE(server_.service().get_requests().empty());
  EXPECT_THAT(console_.out.str(), HasSubstr(absl::StrCat("download with: gpuctl get ", id,
                                                         " --host ", server_.target())));
  EXPECT_THAT(console_.out.str(), HasSubstr(absl::StrCat(server_.target(), "    7     -  ok")));
}

TEST_F(CliTraceCommandTest, AGivenStartDelaySendsOneInstant) {
  server_.service().trace = Script({Process(100, 0)}, {Result(100, 0, v1::CAPTURE_STATUS_OK)});
  ASSERT_EQ(Run(TraceArgs({"--start-delay", "2s", "--json", "--no-download"})), kExitOk)
      << console_.err.str();
  std::vector<v1::TraceRequest> requests = server_.service().trace_requests();
  ASSERT_EQ(requests.size(), 1u);
  // The instant is read once, before the host is contacted; caller_time
  // right before sending, so after the clock read the instant came from
  // (and, on a slow machine, possibly after the instant itself).
  ASSERT_TRUE(requests[0].has_start_time());
  ASSERT_TRUE(requests[0].has_caller_time());
  const absl::Time start = ToTime(requests[0].start_time());
  EXPECT_GE(start, begin_ + absl::Seconds(2));
  EXPECT_LE(start, ToTime(requests[0].caller_time()) + absl::Seconds(2));
  nlohmann::json json = nlohmann::json::parse(console_.out.str());
  EXPECT_EQ(json["startTime"], TimeUtil::ToString(requests[0].start_time()));
}

TEST_F(CliTraceCommandTest, WithoutAStartDelayTheDaemonsInstantIsReported) {
  server_.service().trace = Script({Process(100, 0)}, {Result(100, 0, v1::CAPTURE_STATUS_OK)});
  ASSERT_EQ(Run(TraceArgs({"--json", "--no-download"})), kExitOk) << console_.err.str();
  ASSERT_EQ(server_.service().trace_requests().size(), 1u);
  EXPECT_FALSE(server_.service().trace_requests()[0].has_start_time());
  // The fake daemon's TraceStarted.start_time.
  nlohmann::json json = nlohmann::json::parse(console_.out.str());
  EXPECT_EQ(json["startTime"], "1970-01-01T00:16:40Z");
}

TEST_F(CliTraceCommandTest, AllJobsLetsAPidReachSeveralJobs) {
  server_.service().trace = Script({Process(7, -1)}, {Result(7, -1, v1::CAPTURE_STATUS_OK)});
  ASSERT_EQ(Run({"trace", "--pid", "7", "--all-jobs", "--duration", "1s", "--host",
                 server_.target(), "--no-download"}),
            kExitOk)
      << console_.err.str();
  ASSERT_EQ(server_.service().trace_requests().size(), 1u);
  EXPECT_TRUE(server_.service().trace_requests()[0].selector().allow_multiple_jobs());
}

TEST_F(CliTraceCommandTest, PassesActivities) {
  server_.service().trace = Script({Process(7, -1)}, {Result(7, -1, v1::CAPTURE_STATUS_OK)});
  ASSERT_EQ(
      Run(TraceArgs({"--activities", "kernel,memcpy", "--activities", "driver", "--no-download"})),
      kExitOk)
      << console_.err.str();
  ASSERT_EQ(Run(TraceArgs({"--no-download"})), kExitOk) << console_.err.str();
  ASSERT_EQ(Run(TraceArgs({"--activities", "kernel,cpu,sched", "--no-download"})), kExitOk)
      << console_.err.str();
  std::vector<v1::TraceRequest> requests = server_.service().trace_requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_THAT(requests[0].activities(), ElementsAre("kernel", "memcpy", "driver"));
  EXPECT_TRUE(requests[1].activities().empty());
  EXPECT_THAT(requests[2].activities(), ElementsAre("kernel", "cpu", "sched"));
  EXPECT_EQ(requests[2].host_unwind(), v1::HOST_UNWIND_UNSPECIFIED);
}

TEST_F(CliTraceCommandTest, UnwindDwarfNeedsTheCpuActivity) {
  server_.service().trace = Script({Process(7, -1)}, {Result(7, -1, v1::CAPTURE_STATUS_OK)});
  ASSERT_EQ(Run(TraceArgs({"--activities", "cpu", "--unwind", "dwarf", "--no-download"})), kExitOk)
      << console_.err.str();
  ASSERT_EQ(Run(TraceArgs({"--activities", "cpu", "--unwind", "fp", "--no-download"})), kExitOk)
      << console_.err.str();
  std::vector<v1::TraceRequest> requests = server_.service().trace_requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].host_unwind(), v1::HOST_UNWIND_DWARF);
  EXPECT_EQ(requests[1].host_unwind(), v1::HOST_UNWIND_FRAME_POINTER);

  EXPECT_EQ(Run(TraceArgs({"--activities", "kernel", "--unwind", "dwarf"})), kExitUsage);
  EXPECT_THAT(console_.err.str(), HasSubstr("--unwind: needs the cpu activity"));
  EXPECT_EQ(Run(TraceArgs({"--activities", "cpu", "--unwind", "stack"})), kExitUsage);
  EXPECT_THAT(console_.err.str(), HasSubstr("unknown unwinding \"stack\"; valid: fp,dwarf"));
  EXPECT_EQ(server_.service().trace_requests().size(), 2u);
}

TEST_F(CliTraceCommandTest, ResultLinesSayWhatHostContextHolds) {
  v1::ProcessResult recorded = Result(7, 0, v1::CAPTURE_STATUS_OK);
  v1::HostContextResult* host = recorded.mutable_host_context();
  host->set_state(v1::HostContextResult::STATE_RECORDED);
  host->set_samples(312);
  host->set_off_cpu_intervals(18);
  host->set_threads(4);
  host->set_processes(2);
  host->set_dropped_samples(3);
  v1::ProcessResult unavailable = Result(8, 1, v1::CAPTURE_STATUS_OK);
  unavailable.mutable_host_context()->set_state(v1::HostContextResult::STATE_UNAVAILABLE);
  unavailable.mutable_host_context()->set_reason("perf_event_open on thread 8: Permission denied");
  server_.service().trace = Script({Process(7, 0), Process(8, 1)}, {recorded, unavailable});
  ASSERT_EQ(Run(TraceArgs({"--activities", "cpu,sched", "--no-download"})), kExitOk)
      << console_.err.str();
  EXPECT_THAT(console_.out.str(),
              HasSubstr("host context: 312 samples, 18 off-CPU slices, 4 threads in 2 processes, "
                        "3 records lost or over the cap"));
  EXPECT_THAT(
      console_.out.str(),
      HasSubstr("host context unavailable: perf_event_open on thread 8: Permission denied"));
}

TEST_F(CliTraceCommandTest, PassesKinetoOptions) {
  server_.service().trace = Script({Process(7, -1)}, {Result(7, -1, v1::CAPTURE_STATUS_OK)});
  ASSERT_EQ(Run(TraceArgs({"--kineto", "with_stack,record_shapes", "--no-download"})), kExitOk)
      << console_.err.str();
  std::vector<v1::TraceRequest> requests = server_.service().trace_requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_THAT(requests[0].kineto_options(), ElementsAre("with_stack", "record_shapes"));
  EXPECT_NE(Run(TraceArgs({"--kineto", "stack", "--no-download"})), kExitOk);
  EXPECT_THAT(console_.err.str(), HasSubstr("--kineto: unknown option \"stack\""));
}

TEST_F(CliTraceCommandTest, HostFromEnvironment) {
  server_.service().trace = Script({Process(7, 0)}, {Result(7, 0, v1::CAPTURE_STATUS_OK)});
  CliEnv env = console_.env();
  env.env_host = server_.target();
  EXPECT_EQ(RunCli({"trace", "--pid", "7", "--duration", "1s", "--no-download"}, env), kExitOk)
      << console_.err.str();
  EXPECT_EQ(server_.service().trace_requests().size(), 1u);
}

TEST_F(CliTraceCommandTest, OneBusyProcessExitsOneAndShowsMessage) {
  server_.service().trace =
      Script({Process(100, 0), Process(101, 1)},
             {Result(100, 0, v1::CAPTURE_STATUS_OK),
              Result(101, 1, v1::CAPTURE_STATUS_BUSY, "another tool owns the profiler")});
  StoreFiles();
  EXPECT_EQ(Run(TraceArgs()), kExitPartialFailure);
  EXPECT_THAT(console_.out.str(), HasSubstr("busy"));
  EXPECT_THAT(console_.out.str(), HasSubstr("\n    another tool owns the profiler\n"));
  EXPECT_THAT(console_.out.str(), HasSubstr(absl::StrCat("trace ", kTraceId, " saved to")));
  EXPECT_THAT(console_.err.str(), HasSubstr("1 of 2 processes on node1 did not deliver a trace"));
}

TEST_F(CliTraceCommandTest, ProcessWithoutResultIsAFailure) {
  server_.service().trace =
      Script({Process(100, 0), Process(101, 1)}, {Result(100, 0, v1::CAPTURE_STATUS_OK)});
  StoreFiles();
  EXPECT_EQ(Run(TraceArgs()), kExitPartialFailure);
  EXPECT_THAT(console_.out.str(), HasSubstr("no result"));
}

TEST_F(CliTraceCommandTest, NotFoundExitsThreeWithDaemonMessage) {
  server_.service().trace = [](auto*, const auto&, auto*) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "no process of job 42 on node1 (3 attached: jobs 7, 8)");
  };
  EXPECT_EQ(Run(TraceArgs()), kExitNothingMatched);
  EXPECT_THAT(console_.err.str(),
              HasSubstr("no process of job 42 on node1 (3 attached: jobs 7, 8)"));
  EXPECT_EQ(console_.out.str(), "");
}

TEST_F(CliTraceCommandTest, InvalidArgumentExitsFourAsRefused) {
  server_.service().trace = [](auto*, const auto&, auto*) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "duration above the 10m maximum");
  };
  EXPECT_EQ(Run(TraceArgs()), kExitDaemonError);
  EXPECT_THAT(console_.err.str(),
              HasSubstr(absl::StrCat("gpuctld at ", server_.target(),
                                     " refused the request: duration above the 10m maximum")));
}

TEST_F(CliTraceCommandTest, PermissionDeniedExitsFour) {
  server_.service().trace = [](auto*, const auto&, auto*) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "uid 1000 may not trace");
  };
  EXPECT_EQ(Run(TraceArgs()), kExitDaemonError);
  EXPECT_THAT(console_.err.str(), HasSubstr("refused the request: uid 1000 may not trace"));
}

TEST_F(CliTraceCommandTest, UnreachableDaemonExitsFour) {
  // A port that was just free: nothing listens there.
  std::string target;
  {
    FakeServer gone;
    target = gone.target();
  }
  CliEnv env = console_.env();
  EXPECT_EQ(RunCli({"trace", "--job", "1", "--duration", "1s", "--host", target}, env),
            kExitDaemonError);
  EXPECT_THAT(console_.err.str(),
              HasSubstr(absl::StrCat("cannot reach gpuctld at ", target, ": ")));
}

TEST_F(CliTraceCommandTest, NothingStoredSaysSoAndGivesNoHintToOpenFiles) {
  server_.service().trace = Script({Process(100, 0), Process(101, 1)},
                                   {Result(100, 0, v1::CAPTURE_STATUS_BUSY, "profiler taken"),
                                    Result(101, 1, v1::CAPTURE_STATUS_FAILED, "no memory")});
  server_.service().files[kTraceId] = {{"manifest.json", "{}"}};
  EXPECT_EQ(Run(TraceArgs()), kExitPartialFailure);
  const std::string out = console_.out.str();
  EXPECT_THAT(out, Not(HasSubstr("stored by")));
  EXPECT_THAT(
      out, HasSubstr(absl::StrCat(
               "no trace data stored: no process delivered a trace (gpuctld at ", server_.target(),
               " keeps the trace's manifest in /var/lib/gpuctl/traces/", kTraceId, ")\n")));
  EXPECT_THAT(out, Not(HasSubstr("perfetto")));
}

TEST_F(CliTraceCommandTest, StreamWithoutCompletionKeepsWhatArrived) {
  server_.service().trace =
      Script({Process(100, 0), Process(101, 1)}, {Result(100, 0, v1::CAPTURE_STATUS_OK)},
             /*complete=*/false);
  StoreFiles();
  EXPECT_EQ(Run(TraceArgs()), kExitPartialFailure);
  EXPECT_THAT(console_.err.str(), HasSubstr("before the trace completed"));
  // The delivered trace is downloaded; the process without a result shows.
  ASSERT_EQ(server_.service().get_requests().size(), 1u);
  EXPECT_TRUE(fs::exists(fs::path(dir_.path()) / kTraceId / "node1-rank0-pid100.json.gz"));
  EXPECT_THAT(console_.out.str(), HasSubstr("no result"));
}

TEST_F(CliTraceCommandTest, StreamBrokenBeforeStartExitsFour) {
  server_.service().trace = [](auto*, const auto&, auto*) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "daemon shutting down");
  };
  EXPECT_EQ(Run(TraceArgs()), kExitDaemonError);
  EXPECT_THAT(console_.err.str(), HasSubstr("cannot reach gpuctld at"));
  EXPECT_THAT(console_.err.str(), HasSubstr("daemon shutting down"));
}

TEST_F(CliTraceCommandTest, MaliciousFileNameIsRefused) {
  server_.service().trace = Script({Process(100, 0)}, {Result(100, 0, v1::CAPTURE_STATUS_OK)});
  for (std::string evil : {"../escape.json.gz", "/etc/passwd", ".hidden", "a/b", ""}) {
    SCOPED_TRACE(evil);
    server_.service().get_trace = [evil](const v1::GetTraceRequest&,
                                         grpc::ServerWriter<v1::TraceChunk>* writer) {
      v1::TraceChunk chunk;
      chunk.set_file(evil);
      chunk.set_data("owned");
      chunk.set_file_size(5);
      writer->Write(chunk);
      return grpc::Status::OK;
    };
    console_.err.str("");
    EXPECT_EQ(Run(TraceArgs()), kExitPartialFailure);
    EXPECT_THAT(console_.err.str(), HasSubstr("unsafe file name"));
    EXPECT_THAT(ListDir(fs::path(dir_.path()) / kTraceId), ::testing::IsEmpty());
    EXPECT_EQ(ListDir(dir_.path()), std::vector<std::string>{kTraceId});
  }
}

TEST_F(CliTraceCommandTest, JsonOutput) {
  server_.service().trace =
      Script({Process(100, 0), Process(101, 1)},
             {Result(100, 0, v1::CAPTURE_STATUS_OK),
              Result(101, 1, v1::CAPTURE_STATUS_TIMED_OUT, "no result within 32s")});
  StoreFiles();
  EXPECT_EQ(Run(TraceArgs({"--json"})), kExitPartialFailure);
  nlohmann::json json = nlohmann::json::parse(console_.out.str());
  EXPECT_EQ(json["traceId"], kTraceId);
  EXPECT_EQ(json["window"], "time");
  EXPECT_TRUE(json["startTime"].is_string());
  EXPECT_EQ(json["maxStartSkew"], "0.050s");
  EXPECT_EQ(json["duration"], "2s");
  EXPECT_EQ(json["iterations"], 0);
  EXPECT_TRUE(json["startStep"].is_null());
  const fs::path saved = fs::path(dir_.path()) / kTraceId;
  EXPECT_EQ(json["savedTo"], saved.string());
  ASSERT_EQ(json["hosts"].size(), 1u);
  const nlohmann::json& host = json["hosts"][0];
  EXPECT_EQ(host["host"], server_.target());
  EXPECT_EQ(host["hostname"], "node1");
  EXPECT_TRUE(host["target"].is_null());
  EXPECT_EQ(host["status"], "failed");
  EXPECT_EQ(host["error"], "1 of 2 processes on node1 did not deliver a trace");
  EXPECT_EQ(host["clock"]["offset"], "0.000120s");
  EXPECT_EQ(host["clock"]["receivedAt"], "1970-01-01T00:16:39Z");
  EXPECT_EQ(host["startTime"], "1970-01-01T00:16:40Z");
  EXPECT_EQ(host["endTime"], "1970-01-01T00:16:42Z");
  EXPECT_EQ(host["location"], absl::StrCat("/var/lib/gpuctl/traces/", kTraceId));
  EXPECT_EQ(host["storage"]["state"], "STORAGE_STATE_LOCAL");
  EXPECT_EQ(host["processesOk"], 1);
  EXPECT_EQ(host["processesFailed"], 1);
  ASSERT_EQ(host["results"].size(), 2u);
  EXPECT_EQ(host["results"][0]["status"], "CAPTURE_STATUS_OK");
  EXPECT_EQ(host["results"][1]["status"], "CAPTURE_STATUS_TIMED_OUT");
  EXPECT_EQ(host["results"][1]["message"], "no result within 32s");
  EXPECT_TRUE(host["missingPids"].empty());
  EXPECT_EQ(host["files"].size(), 3u);
  EXPECT_EQ(host["savedTo"], saved.string());
  // One host: its manifest keeps its name.
  EXPECT_TRUE(fs::exists(saved / "manifest.json"));
  EXPECT_THAT(console_.err.str(), HasSubstr("stored by gpuctld at"));
}

TEST_F(CliTraceCommandTest, SaysWhereTheTraceIsStoredAndWhetherItsUploadIsPending) {
  const std::string remote = absl::StrCat("s3://traces/gp/2024/07/11/", kTraceId, "/");
  v1::TraceStorage uploaded;
  uploaded.set_state(v1::STORAGE_STATE_UPLOADED);
  uploaded.set_remote_location(remote);
  uploaded.set_remote_endpoint("http://127.0.0.1:7480");
  server_.service().trace = testing::ScriptedTrace(
      {Process(100, 0)}, {Result(100, 0, v1::CAPTURE_STATUS_OK)}, true, "node1", uploaded);
  ASSERT_EQ(Run(TraceArgs({"--no-download"})), kExitOk) << console_.err.str();
  EXPECT_THAT(console_.out.str(), HasSubstr(absl::StrCat("stored by gpuctld at ", server_.target(),
                                                         " in ", remote, "\n")));

  v1::TraceStorage pending;
  pending.set_state(v1::STORAGE_STATE_UPLOAD_PENDING);
  pending.set_local_location(absl::StrCat("/var/lib/gpuctl/traces/", kTraceId));
  pending.set_remote_location(remote);
  pending.set_upload_error("S3 PutObject at http://127.0.0.1:7480 failed: connection refused");
  pending.set_upload_attempts(1);
  server_.service().trace = testing::ScriptedTrace(
      {Process(100, 0)}, {Result(100, 0, v1::CAPTURE_STATUS_OK)}, true, "node1", pending);
  console_.out.str("");
  // The trace is safe on the daemon's disk: not a failure.
  ASSERT_EQ(Run(TraceArgs({"--no-download"})), kExitOk) << console_.err.str();
  const std::string expected =
      absl::StrCat("stored by gpuctld at ", server_.target(), " in /var/lib/gpuctl/traces/",
                   kTraceId, "; upload to ", remote,
                   " pending: S3 PutObject at http://127.0.0.1:7480 failed: connection refused\n");
  EXPECT_THAT(console_.out.str(), HasSubstr(expected));

  console_.out.str("");
  ASSERT_EQ(Run(TraceArgs({"--no-download", "--json"})), kExitOk) << console_.err.str();
  nlohmann::json host = nlohmann::json::parse(console_.out.str())["hosts"][0];
  EXPECT_EQ(host["storage"]["state"], "STORAGE_STATE_UPLOAD_PENDING");
  EXPECT_EQ(host["storage"]["localLocation"], absl::StrCat("/var/lib/gpuctl/traces/", kTraceId));
  EXPECT_EQ(host["storage"]["remoteLocation"], remote);
  EXPECT_EQ(host["storage"]["uploadError"],
            "S3 PutObject at http://127.0.0.1:7480 failed: connection refused");
  EXPECT_EQ(host["storage"]["uploadAttempts"], 1);
}

TEST_F(CliTraceCommandTest, TerminalProgressRedrawsAndClears) {
  server_.service().trace = Script({Process(100, 0)}, {Result(100, 0, v1::CAPTURE_STATUS_OK)});
  CliEnv env = console_.env();
  env.err_is_terminal = true;
  env.terminal_columns = 40;
  std::vector<std::string> args = TraceArgs({"--no-download"});
  EXPECT_EQ(RunCli(args, env), kExitOk);
  const std::string err = console_.err.str();
  EXPECT_THAT(err, HasSubstr("\x1b[2K  pid 100: capturing\n"));
  EXPECT_THAT(err, HasSubstr("\x1b[2K  window "));
  // Header, window and one process erased, line by line.
  EXPECT_THAT(err, HasSubstr("\x1b[3F\x1b[2K\n\x1b[2K\n\x1b[2K\n\x1b[3F"));
  EXPECT_THAT(err, Not(HasSubstr("trace T1: 1 process selected on node1, window 2s")));  // cut
  EXPECT_THAT(console_.out.str(), HasSubstr(absl::StrCat(server_.target(), "  100     0  ok")));
}

TEST_F(CliTraceCommandTest, InterruptCancelsTheTrace) {
  server_.service().trace = [&](grpc::ServerContext* context, const v1::TraceRequest& request,
                                grpc::ServerWriter<v1::TraceEvent>* writer) {
    v1::TraceEvent started;
    started.mutable_started()->set_trace_id(request.trace_id());
    *started.mutable_started()->add_processes() = Process(100, 0);
    writer->Write(started);
    EXPECT_TRUE(interrupts_.Fire());
    // Progress until the client's cancellation reaches the server; each
    // Write blocks on flow control, so this does not spin.
    v1::TraceEvent progress;
    progress.mutable_progress()->set_pid(100);
    for (int i = 0; i < 1000000 && writer->Write(progress); ++i) {
    }
    return grpc::Status::OK;
  };
  EXPECT_EQ(Run(TraceArgs()), kExitInterrupted);
  EXPECT_THAT(
      console_.err.str(),
      HasSubstr(absl::StrCat("trace ", kTraceId, " cancelled; the daemon stops the capture")));
  EXPECT_EQ(console_.out.str(), "");
}

TEST(CliUsageTest, BadUsageExitsTwoWithoutContactingTheDaemon) {
  FakeServer server;
  const std::string host = server.target();
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  std::vector<Case> cases = {
      {{}, "subcommand is required"},
      {{"frobnicate"}, "frobnicate"},
      {{"trace", "--job", "1", "--host", host}, "--duration is required"},
      {{"trace", "--job", "1", "--duration", "", "--host", host}, "--duration: invalid duration"},
      {{"trace", "--job", "1", "--duration", "5", "--host", host}, "unit is required"},
      {{"trace", "--job", "1", "--duration", "0s", "--host", host}, "greater than zero"},
      {{"trace", "--job", "1", "--duration", "-1s", "--host", host}, "must be positive"},
      {{"trace", "--job", "1", "--duration", "soon", "--host", host}, "invalid duration"},
      {{"trace", "--duration", "5s", "--host", host},
       "select processes with --job ID, --pid N, --rank SET and/or --label KEY=VALUE"},
      {{"trace", "--duration", "5s", "--limit", "2", "--include-helpers", "--host", host},
       "select processes"},
      {{"trace", "--rank", "0-3,x", "--duration", "5s", "--host", host},
       "--rank \"0-3,x\": \"x\" is not a rank"},
      {{"trace", "--rank", "4-2", "--duration", "5s", "--host", host}, "\"4-2\" ends before"},
      {{"trace", "--label", "team", "--duration", "5s", "--host", host}, "expected KEY=VALUE"},
      {{"trace", "--job", "1", "--limit", "-1", "--duration", "5s", "--host", host}, "--limit"},
      {{"trace", "--job", "1", "--iterations", "0", "--host", host},
       "--iterations: expected a number of steps, an integer from 1 to 1000000, got \"0\""},
      {{"trace", "--job", "1", "--iterations", "1000001", "--host", host}, "--iterations"},
      {{"trace", "--job", "1", "--duration", "5s", "--step-roundup", "10", "--host", host},
       "--step-roundup: applies to iteration windows"},
      {{"trace", "--job", "1", "--duration", "5s", "--start-step", "10", "--host", host},
       "--start-step: applies to iteration windows"},
      {{"trace", "--job", "1", "--iterations", "5", "--max-start-skew", "10ms", "--host", host},
       "--max-start-skew: applies to time windows"},
      {{"trace", "--job", "1", "--iterations", "5", "--step-roundup", "0", "--host", host},
       "--step-roundup"},
      {{"trace", "--job", "1", "--iterations", "5", "--step-margin", "many", "--host", host},
       "--step-margin: expected \"auto\""},
      {{"trace", "--job", "1", "--iterations", "5", "--start-step", "-4", "--host", host},
       "--start-step"},
      {{"trace", "--job", "1", "--iterations", "5", "--start-step", "4", "--step-margin", "3",
        "--host", host},
       "give either them or --start-step"},
      {{"trace", "--job", "1", "--duration", "5s", "--start-delay", "2h", "--host", host},
       "--start-delay: at most 1h"},
      {{"trace", "--job", "1", "--duration", "5s", "--max-start-skew", "0s", "--host", host},
       "--max-start-skew: invalid duration"},
      {{"trace", "--job", "1", "--duration", "5s", "--parallel", "0", "--host", host},
       "--parallel: expected a number of hosts to contact at once, an integer from 1 to 1024"},
      {{"trace", "--job", "1", "--duration", "5s", "--host-timeout", "soon", "--host", host},
       "--host-timeout: invalid duration"},
      {{"trace", "--job", "1", "--duration", "5s", "--hosts", "node1"},
       "--hosts: invalid host list"},
      {{"trace", "--job", "1", "--duration", "5s", "--hosts-file", "/nonexistent/hosts"},
       "cannot read"},
      {{"ps", "--rank", "1-", "--host", host}, "--rank \"1-\""},
      {{"ps", "--parallel", "5000", "--host", host}, "--parallel"},
      {{"trace", "--pid", "0", "--duration", "5s", "--host", host}, "--pid"},
      {{"trace", "--pid", "abc", "--duration", "5s", "--host", host}, "--pid"},
      {{"trace", "--pid", "-3", "--duration", "5s", "--host", host}, "pid"},
      {{"trace", "--job", "1", "--duration", "5s", "--trace-id", "../x", "--host", host},
       "--trace-id"},
      {{"trace", "--job", "1", "--duration", "5s", "--trace-id", "my-trace_1", "--host", host},
       "is not a lowercase UUIDv7"},
      {{"trace", "--job", "1", "--duration", "5s", "--host", "node:99999"},
       "--host: invalid host \"node:99999\""},
      {{"status", "--host", "node:0"}, "--host: invalid host"},
      {{"trace", "--job", "1", "--duration", "5s", "--activities", "kernel,kernels", "--host",
        host},
       "--activities: unknown activity \"kernels\"; valid: kernel,memcpy,memset,runtime,driver,"
       "sync,nvtx,overhead,memory,cpu,sched"},
      {{"trace", "--job", "1", "--duration", "5s", "--bogus"}, "--bogus"},
      {{"get", "--host", host}, "trace_id"},
      {{"get", "../etc", "--host", host}, "get: \"../etc\" is not a lowercase UUIDv7"},
      {{"get", "T1", "--host", host}, "get: \"T1\" is not a lowercase UUIDv7"},
      {{"get", kTraceId, "--file", "../x", "--host", host}, "invalid file name"},
      {{"traces", "--limit", "0", "--host", host},
       "gpuctl: --limit: expected a number of traces, a positive integer, got \"0\""},
      {{"traces", "--limit", "x", "--host", host},
       "--limit: expected a number of traces, a positive integer, got \"x\""},
      {{"ps", "--limit", "-1", "--host", host},
       "--limit: expected a number of processes per host (0: no limit), an integer, 0 or more, "
       "got \"-1\""},
      {{"ps", "--parallel", "x", "--host", host},
       "--parallel: expected a number of hosts to contact at once, an integer from 1 to 1024, "
       "got \"x\""},
      {{"trace", "--pid", "abc", "--duration", "5s", "--host", host},
       "gpuctl: --pid: expected a process id, a positive integer, got \"abc\""},
      {{"trace", "--job", "1", "--iterations", "abc", "--host", host},
       "--iterations: expected a number of steps, an integer from 1 to 1000000, got \"abc\""},
      {{"trace", "--job", "1", "--iterations", "5", "--step-roundup", "0", "--host", host},
       "--step-roundup: expected a step count to round the start up to, a positive integer, got "
       "\"0\""},
      {{"trace", "--job", "1", "--iterations", "5", "--start-step", "x", "--host", host},
       "--start-step: expected a step number, an integer, 0 or more, got \"x\""},
      {{"trace", "--job", "1", "--duration", "5sec", "--host", host},
       "--duration: invalid duration \"5sec\": unknown unit \"sec\" (units: h, m, s, ms, us, "
       "ns)"},
      {{"trace", "--job", "1", "--durration", "5s", "--host", host},
       "gpuctl: trace: unknown flag --durration; did you mean --duration?\n"},
      {{"trace", "--job", "1", "--duration=5s", "--lable=a=b", "--host", host},
       "gpuctl: trace: unknown flag --lable; did you mean --label?\n"},
      {{"ps", "--jbo", "1", "--host", host},
       "gpuctl: ps: unknown flag --jbo; did you mean --job?\n"},
      {{"status", "--frobnicate", "--host", host}, "gpuctl: status: unknown flag --frobnicate\n"},
      {{"status", "extra", "--host", host}, "gpuctl: status: unexpected argument \"extra\"\n"},
      {{"--hots", "x", "status"}, "gpuctl: unknown flag --hots; a command comes first"},
      {{"help", "nope"}, "gpuctl: help: unknown command \"nope\""},
  };
  for (const Case& c : cases) {
    TestConsole console;
    EXPECT_EQ(RunCli(c.args, console.env()), kExitUsage) << absl::StrJoin(c.args, " ");
    EXPECT_THAT(console.err.str(), HasSubstr(c.message)) << absl::StrJoin(c.args, " ");
  }
  EXPECT_EQ(server.service().calls(), 0);
}

TEST(CliUsageTest, VersionAndHelp) {
  TestConsole console;
  EXPECT_EQ(RunCli({"--version"}, console.env()), kExitOk);
  EXPECT_THAT(console.out.str(), HasSubstr("gpuctl "));
  TestConsole help;
  EXPECT_EQ(RunCli({"help"}, help.env()), kExitOk);
  for (const char* command : {"trace", "ps", "traces", "get", "status"}) {
    EXPECT_THAT(help.out.str(), HasSubstr(command));
  }
  TestConsole trace_help;
  EXPECT_EQ(RunCli({"trace", "--help"}, trace_help.env()), kExitOk);
  EXPECT_THAT(trace_help.out.str(), HasSubstr("--duration"));
  for (const char* command : {"trace", "ps", "traces", "get", "status"}) {
    TestConsole dash_help;
    TestConsole help_command;
    EXPECT_EQ(RunCli({command, "--help"}, dash_help.env()), kExitOk);
    EXPECT_EQ(RunCli({"help", command}, help_command.env()), kExitOk) << help_command.err.str();
    EXPECT_EQ(help_command.out.str(), dash_help.out.str()) << command;
    EXPECT_THAT(help_command.out.str(), HasSubstr(absl::StrCat("gpuctl ", command)));
  }
}

}  // namespace
}  // namespace gpuctl::cli
