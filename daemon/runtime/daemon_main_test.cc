#include "daemon/runtime/daemon_main.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "daemon/ipc/testing/ipc_test_client.h"
#include "daemon/rpc/testing/raw_call.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

extern char** environ;

namespace gpuctl::daemon {
namespace {

using ::gpuctl::daemon::testing::IpcTestClient;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuctld-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    options_.listen_address = "127.0.0.1:0";
    options_.socket_path = dir_ + "/run/gpuctl.sock";
    options_.store_dir = dir_ + "/traces";
    options_.ready_file = dir_ + "/ready";
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string dir_;
  DaemonOptions options_;
};

TEST_F(DaemonTest, ServesGrpcAndIpcThenStopsCleanly) {
  auto daemon = Daemon::Start(options_);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  std::string address = (*daemon)->grpc_address();
  EXPECT_THAT(address, ::testing::StartsWith("127.0.0.1:"));
  EXPECT_NE(address, "127.0.0.1:0");
  EXPECT_EQ(ReadFile(options_.ready_file), address);

  // A process attaches over IPC and is then listed over gRPC.
  auto client = IpcTestClient::Connect(options_.socket_path);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE(client->SendHello().ok());
  auto ack = client->Receive();
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->hello_ack().protocol_major(), 1u);

  auto stub = v1::Gpuctl::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::ListProcessesResponse processes;
  grpc::Status status = stub->ListProcesses(&ctx, v1::ListProcessesRequest(), &processes);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(processes.processes_size(), 1);
  EXPECT_EQ(processes.processes(0).pid(), getpid());

  grpc::ClientContext ctx2;
  ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::GetStatusResponse daemon_status;
  ASSERT_TRUE(stub->GetStatus(&ctx2, v1::GetStatusRequest(), &daemon_status).ok());
  EXPECT_EQ(daemon_status.socket_path(), options_.socket_path);

  (*daemon)->Shutdown();
  EXPECT_TRUE(client->WaitForClose());
  EXPECT_FALSE(std::filesystem::exists(options_.socket_path));
}

TEST_F(DaemonTest, RefusesASocketAnotherDaemonServes) {
  auto first = Daemon::Start(options_);
  ASSERT_TRUE(first.ok()) << first.status();
  DaemonOptions second_options = options_;
  second_options.ready_file.clear();
  auto second = Daemon::Start(second_options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), ::testing::HasSubstr("already listening"));
  // The first one is unaffected.
  auto client = IpcTestClient::Connect(options_.socket_path);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client->SendHello().ok());
  EXPECT_TRUE(client->Receive().ok());
}

TEST_F(DaemonTest, ServesGrpcOnAUnixSocketWhoseModeIsTheAccessControl) {
  const std::string api = dir_ + "/api/gpuctl-api.sock";
  options_.listen_address = "unix:" + api;
  options_.listen_mode = 0660;
  auto daemon = Daemon::Start(options_);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_EQ((*daemon)->grpc_address(), "unix:" + api);
  struct stat st {};
  ASSERT_EQ(lstat(api.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  auto stub =
      v1::Gpuctl::NewStub(grpc::CreateChannel("unix:" + api, grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::GetStatusResponse status;
    ASSERT_TRUE(stub->GetStatus(&ctx, v1::GetStatusRequest(), &status).ok());
  }

  // A second daemon on the same path fails and leaves the socket alone.
  DaemonOptions second_options = options_;
  second_options.socket_path = dir_ + "/second.sock";
  second_options.store_dir = dir_ + "/second-traces";
  second_options.ready_file.clear();
  auto second = Daemon::Start(second_options);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), ::testing::HasSubstr("address in use"));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::GetStatusResponse status;
    EXPECT_TRUE(stub->GetStatus(&ctx, v1::GetStatusRequest(), &status).ok());
  }
  daemon->reset();
  EXPECT_FALSE(std::filesystem::exists(api)) << "removed at shutdown";
}

TEST_F(DaemonTest, NeverReplacesAFileThatIsNotASocketWithTheGrpcSocket) {
  const std::string api = dir_ + "/precious";
  { std::ofstream(api) << "data"; }
  options_.listen_address = "unix:" + api;
  auto daemon = Daemon::Start(options_);
  ASSERT_FALSE(daemon.ok());
  EXPECT_THAT(daemon.status().message(), ::testing::HasSubstr("is not a socket"));
  std::ifstream in(api);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "data");
}

TEST_F(DaemonTest, RefusesAGrpcAddressAnotherDaemonServes) {
  auto first = Daemon::Start(options_);
  ASSERT_TRUE(first.ok()) << first.status();
  // Its own socket and store: only the gRPC address is shared.
  DaemonOptions second_options = options_;
  second_options.listen_address = (*first)->grpc_address();
  second_options.socket_path = dir_ + "/second.sock";
  second_options.store_dir = dir_ + "/second-traces";
  second_options.ready_file.clear();
  auto second = Daemon::Start(second_options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(),
              ::testing::HasSubstr(absl::StrCat((*first)->grpc_address(), ": address in use")));
  EXPECT_FALSE(std::filesystem::exists(second_options.socket_path));
  // Every call still reaches the first one.
  auto stub = v1::Gpuctl::NewStub(
      grpc::CreateChannel((*first)->grpc_address(), grpc::InsecureChannelCredentials()));
  for (int i = 0; i < 4; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::GetStatusResponse status;
    ASSERT_TRUE(stub->GetStatus(&ctx, v1::GetStatusRequest(), &status).ok());
    EXPECT_EQ(status.socket_path(), options_.socket_path);
  }
}

// The Trace call's answer to a start instant in the past, over a real
// channel to a real daemon.
grpc::Status TraceStartingAt(const std::string& address, absl::Time start, absl::Duration skew) {
  auto stub = v1::Gpuctl::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  v1::TraceRequest request;
  request.mutable_selector()->set_job_id("past");
  request.mutable_duration()->set_seconds(1);
  request.mutable_start_time()->set_seconds(absl::ToUnixSeconds(start));
  request.mutable_max_start_skew()->set_seconds(absl::ToInt64Seconds(skew));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto reader = stub->Trace(&ctx, request);
  v1::TraceEvent event;
  while (reader->Read(&event)) {
  }
  return reader->Finish();
}

TEST_F(DaemonTest, TraceRefusesAStartInstantFurtherInThePastThanTheSkew) {
  auto daemon = Daemon::Start(options_);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::string& address = (*daemon)->grpc_address();
  // One second after the epoch, with a skew of a second.
  grpc::Status epoch = TraceStartingAt(address, absl::FromUnixSeconds(1), absl::Seconds(1));
  EXPECT_EQ(epoch.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(epoch.error_message(),
              ::testing::MatchesRegex("start_time is [0-9]+h.* in the past of this daemon's "
                                      "clock, more than the max start skew 1s: .*"));
  // A minute ago within a skew of 30 minutes is valid: the selector decides
  // (nothing attached matches).
  grpc::Status matched =
      TraceStartingAt(address, absl::Now() - absl::Minutes(1), absl::Minutes(30));
  EXPECT_EQ(matched.error_code(), grpc::StatusCode::NOT_FOUND) << matched.error_message();
}

TEST_F(DaemonTest, ReportsItsConfiguredHostName) {
  options_.host_name = "gpu-node-9";
  auto daemon = Daemon::Start(options_);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = v1::Gpuctl::NewStub(
      grpc::CreateChannel((*daemon)->grpc_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::GetStatusResponse status;
  ASSERT_TRUE(stub->GetStatus(&ctx, v1::GetStatusRequest(), &status).ok());
  EXPECT_EQ(status.host(), "gpu-node-9");
  grpc::ClientContext ctx2;
  ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::ListProcessesResponse processes;
  ASSERT_TRUE(stub->ListProcesses(&ctx2, v1::ListProcessesRequest(), &processes).ok());
  EXPECT_EQ(processes.host(), "gpu-node-9");
}

s3::S3Config UnreachableS3() {
  s3::S3Config config;
  config.endpoint = "http://127.0.0.1:9";
  config.region = "us-east-1";
  config.bucket = "traces";
  config.prefix = "fleet/a";
  config.path_style = true;
  return config;
}

TEST_F(DaemonTest, WithS3ReportsTheBucketAndTheSpool) {
  options_.s3 = UnreachableS3();
  options_.s3->access_key_id = "AKIDTEST";
  options_.s3->secret_access_key = "secret";
  options_.s3_store.upload_wait = absl::ZeroDuration();
  auto daemon = Daemon::Start(options_);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = v1::Gpuctl::NewStub(
      grpc::CreateChannel((*daemon)->grpc_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::GetStatusResponse status;
  ASSERT_TRUE(stub->GetStatus(&ctx, v1::GetStatusRequest(), &status).ok());
  EXPECT_EQ(status.store_location(), "s3://traces/fleet/a (spooled in " + options_.store_dir + ")");
  (*daemon)->Shutdown();
}

TEST_F(DaemonTest, WithS3RefusesToStartWithoutCredentials) {
  options_.s3 = UnreachableS3();
  options_.s3->credentials_file = dir_ + "/no-such-credentials";
  auto daemon = Daemon::Start(options_);
  ASSERT_FALSE(daemon.ok());
  const std::string message(daemon.status().message());
  EXPECT_THAT(message, ::testing::StartsWith("store.s3: "));
  EXPECT_THAT(message, ::testing::HasSubstr(dir_ + "/no-such-credentials"));
  // Nothing is left serving.
  EXPECT_FALSE(std::filesystem::exists(options_.socket_path));
}

// Runs `args`; its stderr goes to `stderr_path` when one is given.
pid_t Spawn(const std::vector<std::string>& args, const std::string& stderr_path = "") {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!stderr_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
  }
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

int WaitExit(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F(DaemonTest, BinaryWritesReadyFileAndStopsOnSigterm) {
  pid_t pid = Spawn({GPUCTLD_PATH, "--listen", "127.0.0.1:0", "--socket", options_.socket_path,
                     "--store", options_.store_dir, "--ready-file", options_.ready_file});
  ASSERT_GT(pid, 0);
  // The ready file appears atomically once both servers accept connections.
  absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!std::filesystem::exists(options_.ready_file) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(std::filesystem::exists(options_.ready_file));
  EXPECT_THAT(ReadFile(options_.ready_file), ::testing::MatchesRegex("127\\.0\\.0\\.1:[0-9]+"));
  auto client = IpcTestClient::Connect(options_.socket_path);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  EXPECT_EQ(WaitExit(pid), 0);
  EXPECT_TRUE(client->WaitForClose());
}

// A request whose string field is not UTF-8: the client hears what is
// wrong, and libprotobuf's complaint reaches the log as a structured line.
TEST_F(DaemonTest, BinaryAnswersUnparsableRequestsAndLogsNoUnstructuredLine) {
  const std::string log = dir_ + "/gpuctld.log";
  pid_t pid = Spawn({GPUCTLD_PATH, "--listen", "127.0.0.1:0", "--socket", options_.socket_path,
                     "--store", options_.store_dir, "--ready-file", options_.ready_file},
                    log);
  ASSERT_GT(pid, 0);
  absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!std::filesystem::exists(options_.ready_file) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(std::filesystem::exists(options_.ready_file));
  grpc::Status status = testing::RawCall(
      grpc::CreateChannel(ReadFile(options_.ready_file), grpc::InsecureChannelCredentials()),
      "/gpuctl.v1.Gpuctl/GetTrace", std::string("\x0a\x01\xff", 3));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_EQ(status.error_message(),
            "GetTrace request: not a valid gpuctl.v1.GetTraceRequest (field trace_id is not "
            "valid UTF-8)");
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  EXPECT_EQ(WaitExit(pid), 0);
  const std::string written = ReadFile(log);
  EXPECT_THAT(written, ::testing::Not(::testing::HasSubstr("[libprotobuf")));
  EXPECT_THAT(written, ::testing::HasSubstr("msg=\"libprotobuf\""));
  EXPECT_THAT(written, ::testing::HasSubstr("invalid UTF-8"));
}

TEST_F(DaemonTest, BinaryExitsWithTwoOnBadFlags) {
  pid_t pid = Spawn({GPUCTLD_PATH, "--max-duration", "forever"});
  ASSERT_GT(pid, 0);
  EXPECT_EQ(WaitExit(pid), 2);
}

}  // namespace
}  // namespace gpuctl::daemon
