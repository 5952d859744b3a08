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
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::cli {
namespace {

namespace fs = std::filesystem;
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

v1::ProcessInfo Process(int pid, int rank) {
  v1::ProcessInfo p;
  p.set_pid(pid);
  p.set_rank(rank);
  p.set_job_id("42");
  p.set_hostname("node1");
  return p;
}

v1::ProcessResult Result(int pid, int rank, v1::CaptureStatus status, std::string message = "") {
  v1::ProcessResult r;
  r.set_pid(pid);
  r.set_rank(rank);
  r.set_host("node1");
  r.set_job_id("42");
  r.set_status(status);
  r.set_message(std::move(message));
  if (status == v1::CAPTURE_STATUS_OK) {
    r.set_event_count(1000 + pid);
    r.set_stored_bytes(12595);
    r.set_file(absl::StrCat("node1-rank", rank, "-pid", pid, ".json.gz"));
  }
  return r;
}

// A daemon that selects `processes`, reports each as capturing and then
// `results`, and completes.
testing::FakeGpuctlService::TraceFn Script(std::vector<v1::ProcessInfo> processes,
                                           std::vector<v1::ProcessResult> results,
                                           bool complete = true) {
  return [=](grpc::ServerContext*, const v1::TraceRequest& request,
             grpc::ServerWriter<v1::TraceEvent>* writer) {
    std::string id = request.trace_id().empty() ? "T1" : request.trace_id();
    v1::TraceEvent started;
    started.mutable_started()->set_trace_id(id);
    started.mutable_started()->set_host("node1");
    started.mutable_started()->mutable_start_time()->set_seconds(1000);
    started.mutable_started()->mutable_end_time()->set_seconds(1002);
    for (const auto& p : processes) *started.mutable_started()->add_processes() = p;
    writer->Write(started);
    for (const auto& p : processes) {
      v1::TraceEvent progress;
      progress.mutable_progress()->set_pid(p.pid());
      progress.mutable_progress()->set_phase(v1::PROCESS_PHASE_CAPTURING);
      writer->Write(progress);
    }
    uint32_t ok = 0;
    for (const auto& r : results) {
      v1::TraceEvent event;
      *event.mutable_result() = r;
      writer->Write(event);
      ok += r.status() == v1::CAPTURE_STATUS_OK;
    }
    if (complete) {
      v1::TraceEvent done;
      done.mutable_completed()->set_trace_id(id);
      done.mutable_completed()->set_location(absl::StrCat("/var/lib/gpuctl/traces/", id));
      done.mutable_completed()->set_processes_ok(ok);
      done.mutable_completed()->set_processes_failed(results.size() - ok);
      writer->Write(done);
    }
    return grpc::Status::OK;
  };
}

class CliTraceCommandTest : public ::testing::Test {
 protected:
  int Run(std::vector<std::string> args) {
    CliEnv env = console_.env();
    env.interrupts = &interrupts_;
    return RunCli(args, env);
  }
  std::vector<std::string> TraceArgs(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"trace",  "--job",          "42", "--duration", "2s",
                                     "--host", server_.target(), "-o", dir_.path()};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  void StoreFiles() {
    std::string binary;
    for (int i = 0; i < 300; ++i) binary.push_back(static_cast<char>(i * 37));
    files_ = {{"node1-rank0-pid100.json.gz", binary},
              {"node1-rank1-pid101.json.gz", std::string("\0\x1f\x8b", 3)},
              {"manifest.json", "{\"traceId\":\"T1\"}"}};
    server_.service().files["T1"] = files_;
  }

  FakeServer server_;
  TestConsole console_;
  ManualInterrupts interrupts_;
  TempDir dir_;
  std::map<std::string, std::string> files_;
};

TEST_F(CliTraceCommandTest, HappyPathPrintsTableAndDownloadsExactBytes) {
  server_.service().trace =
      Script({Process(100, 0), Process(101, 1)},
             {Result(101, 1, v1::CAPTURE_STATUS_OK), Result(100, 0, v1::CAPTURE_STATUS_OK)});
  StoreFiles();

  ASSERT_EQ(Run(TraceArgs()), kExitOk) << console_.err.str();

  const std::string out = console_.out.str();
  EXPECT_THAT(out, HasSubstr("HOST   PID  RANK  STATUS  EVENTS     BYTES  FILE\n"));
  EXPECT_THAT(out,
              HasSubstr("node1  100     0  ok        1100  12.3 KiB  node1-rank0-pid100.json.gz"));
  EXPECT_LT(out.find("pid100"), out.find("pid101"));  // rank order
  const fs::path saved = fs::path(dir_.path()) / "T1";
  EXPECT_THAT(out, HasSubstr(absl::StrCat("trace T1 saved to ", saved.string())));
  EXPECT_THAT(out, HasSubstr("/var/lib/gpuctl/traces/T1"));
  for (const auto& [name, data] : files_) EXPECT_EQ(ReadFile(saved / name), data) << name;
  EXPECT_EQ(ListDir(saved).size(), files_.size());  // no temporaries left

  const std::string err = console_.err.str();
  EXPECT_THAT(err, HasSubstr("trace T1: 2 processes selected on node1, window 2s"));
  EXPECT_THAT(err, HasSubstr("pid 100: capturing"));
  EXPECT_THAT(err, HasSubstr("pid 101: ok, 1101 events, 12.3 KiB"));

  std::vector<v1::TraceRequest> requests = server_.service().trace_requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].selector().job_id(), "42");
  EXPECT_EQ(requests[0].duration().seconds(), 2);
  EXPECT_EQ(requests[0].trace_id(), "");
  ASSERT_EQ(server_.service().get_requests().size(), 1u);
  EXPECT_EQ(server_.service().get_requests()[0].files_size(), 0);
}

TEST_F(CliTraceCommandTest, PassesPidsFractionalDurationAndTraceId) {
  server_.service().trace = Script({Process(7, -1)}, {Result(7, -1, v1::CAPTURE_STATUS_OK)});
  ASSERT_EQ(Run({"trace", "--pid", "7,8", "--pid", "9", "--duration", "1.5s", "--trace-id",
                 "my-trace_1", "--host", server_.target(), "--no-download"}),
            kExitOk)
      << console_.err.str();
  std::vector<v1::TraceRequest> requests = server_.service().trace_requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_THAT(requests[0].selector().pids(), ElementsAre(7, 8, 9));
  EXPECT_EQ(requests[0].selector().job_id(), "");
  EXPECT_EQ(requests[0].duration().seconds(), 1);
  EXPECT_EQ(requests[0].duration().nanos(), 500000000);
  EXPECT_EQ(requests[0].trace_id(), "my-trace_1");
  EXPECT_TRUE(server_.service().get_requests().empty());
  EXPECT_THAT(console_.out.str(), HasSubstr("gpuctl get my-trace_1"));
  EXPECT_THAT(console_.out.str(), HasSubstr("node1    7     -  ok"));
}

TEST_F(CliTraceCommandTest, PassesActivities) {
  server_.service().trace = Script({Process(7, -1)}, {Result(7, -1, v1::CAPTURE_STATUS_OK)});
  ASSERT_EQ(Run(TraceArgs({"--activities", "kernel,memcpy", "--activities", "driver",
                           "--no-download"})),
            kExitOk)
      << console_.err.str();
  ASSERT_EQ(Run(TraceArgs({"--no-download"})), kExitOk) << console_.err.str();
  std::vector<v1::TraceRequest> requests = server_.service().trace_requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_THAT(requests[0].activities(), ElementsAre("kernel", "memcpy", "driver"));
  EXPECT_TRUE(requests[1].activities().empty());
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
  EXPECT_THAT(console_.out.str(), HasSubstr("trace T1 saved to"));
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

TEST_F(CliTraceCommandTest, StreamWithoutCompletionExitsFour) {
  server_.service().trace =
      Script({Process(100, 0)}, {Result(100, 0, v1::CAPTURE_STATUS_OK)}, /*complete=*/false);
  EXPECT_EQ(Run(TraceArgs()), kExitDaemonError);
  EXPECT_THAT(console_.err.str(), HasSubstr("before the trace completed"));
  EXPECT_TRUE(server_.service().get_requests().empty());
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
    EXPECT_THAT(ListDir(fs::path(dir_.path()) / "T1"), ::testing::IsEmpty());
    EXPECT_EQ(ListDir(dir_.path()), std::vector<std::string>{"T1"});
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
  EXPECT_EQ(json["traceId"], "T1");
  EXPECT_EQ(json["host"], "node1");
  ASSERT_EQ(json["results"].size(), 2u);
  EXPECT_EQ(json["results"][0]["status"], "CAPTURE_STATUS_OK");
  EXPECT_EQ(json["results"][1]["status"], "CAPTURE_STATUS_TIMED_OUT");
  EXPECT_EQ(json["results"][1]["message"], "no result within 32s");
  EXPECT_EQ(json["completed"]["location"], "/var/lib/gpuctl/traces/T1");
  EXPECT_EQ(json["savedTo"], (fs::path(dir_.path()) / "T1").string());
  EXPECT_EQ(json["files"].size(), 3u);
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
  EXPECT_THAT(err, HasSubstr("\x1b[2F\x1b[J"));  // header + one process erased
  EXPECT_THAT(err, Not(HasSubstr("trace T1: 1 process selected on node1, window 2s")));  // cut
  EXPECT_THAT(console_.out.str(), HasSubstr("node1  100     0  ok"));
}

TEST_F(CliTraceCommandTest, InterruptCancelsTheTrace) {
  server_.service().trace = [&](grpc::ServerContext* context, const v1::TraceRequest&,
                                grpc::ServerWriter<v1::TraceEvent>* writer) {
    v1::TraceEvent started;
    started.mutable_started()->set_trace_id("T9");
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
  // Whether the started event arrived before the cancellation is a race.
  EXPECT_THAT(console_.err.str(), ::testing::ContainsRegex("trace (T9 )?cancelled"));
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
      {{"trace", "--job", "1", "--duration", "5", "--host", host}, "unit is required"},
      {{"trace", "--job", "1", "--duration", "0s", "--host", host}, "greater than zero"},
      {{"trace", "--job", "1", "--duration", "-1s", "--host", host}, "must be positive"},
      {{"trace", "--job", "1", "--duration", "soon", "--host", host}, "invalid duration"},
      {{"trace", "--duration", "5s", "--host", host}, "--job ID and/or --pid N"},
      {{"trace", "--pid", "0", "--duration", "5s", "--host", host}, "--pid"},
      {{"trace", "--pid", "abc", "--duration", "5s", "--host", host}, "--pid"},
      {{"trace", "--pid", "-3", "--duration", "5s", "--host", host}, "pid"},
      {{"trace", "--job", "1", "--duration", "5s", "--trace-id", "../x", "--host", host},
       "--trace-id"},
      {{"trace", "--job", "1", "--duration", "5s", "--host", "node:99999"}, "invalid --host"},
      {{"trace", "--job", "1", "--duration", "5s", "--activities", "kernel,kernels", "--host",
        host},
       "--activities: unknown activity \"kernels\"; valid: kernel,memcpy,memset,runtime,driver,"
       "sync,nvtx,overhead"},
      {{"trace", "--job", "1", "--duration", "5s", "--bogus"}, "--bogus"},
      {{"get", "--host", host}, "trace_id"},
      {{"get", "../etc", "--host", host}, "invalid trace id"},
      {{"get", "T1", "--file", "../x", "--host", host}, "invalid file name"},
      {{"traces", "--limit", "0", "--host", host}, "--limit"},
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
}

}  // namespace
}  // namespace gpuctl::cli
