// `gpuctl ps` across several fake gpuctlds.
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "cli/cli.h"
#include "cli/exit_codes.h"
#include "cli/fake_gpuctl_service_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::cli {
namespace {

namespace fs = std::filesystem;
using ::gpuctl::cli::testing::DeadTarget;
using ::gpuctl::cli::testing::FakeServer;
using ::gpuctl::cli::testing::TestConsole;
using ::testing::HasSubstr;
using ::testing::Not;

v1::ProcessInfo Info(int pid, int rank, const std::string& host, v1::ProcessRole role,
                     std::vector<std::string> argv) {
  v1::ProcessInfo p;
  p.set_pid(pid);
  p.set_ppid(1);
  p.set_job_id("42");
  p.set_rank(rank);
  p.set_hostname(host);
  p.set_role(role);
  p.set_capture_state(v1::CAPTURE_STATE_IDLE);
  for (auto& a : argv) p.add_cmdline(a);
  return p;
}

class CliFleetPsTest : public ::testing::Test {
 protected:
  CliFleetPsTest() {
    a_.service().processes.set_host("node1");
    v1::ProcessInfo worker = Info(100, 1, "node1", v1::PROCESS_ROLE_WORKER, {"python", "train.py"});
    worker.set_current_step(1187);
    (*worker.mutable_labels())["team"] = "nlp";
    (*worker.mutable_labels())["k8s.pod"] = "train-0";
    *a_.service().processes.add_processes() = worker;
    *a_.service().processes.add_processes() =
        Info(90, -1, "node1", v1::PROCESS_ROLE_LAUNCHER, {"torchrun", "\x1b[31mred"});
    *a_.service().processes.add_processes() =
        Info(101, 0, "node1", v1::PROCESS_ROLE_HELPER, {"python", "-c", "loader"});
    b_.service().processes.set_host("node2");
    *b_.service().processes.add_processes() =
        Info(200, 2, "node2", v1::PROCESS_ROLE_WORKER, {"python", "train.py"});
    v1::ProcessInfo kineto = Info(300, 3, "node2", v1::PROCESS_ROLE_WORKER, {"python", "t.py"});
    kineto.set_kind(v1::PROCESS_KIND_KINETO);
    kineto.set_profiler_busy(true);
    *b_.service().processes.add_processes() = kineto;
  }
  int Run(std::vector<std::string> args) { return RunCli(args, console_.env()); }

  FakeServer a_;
  FakeServer b_;
  TestConsole console_;
};

TEST_F(CliFleetPsTest, TableAcrossHosts) {
  ASSERT_EQ(Run({"ps", "--host", a_.target(), "--host", b_.target()}), kExitOk)
      << console_.err.str();
  const std::string out = console_.out.str();
  // Rows name hosts as contacted (both targets are 127.0.0.1:<5 digits>).
  const std::string a = a_.target();
  ASSERT_EQ(a.size(), b_.target().size());
  EXPECT_THAT(out, HasSubstr(absl::StrCat("HOST", std::string(a.size() - 4, ' '),
                                          "  PID  RANK  ROLE      STEP  JOB  STATE  LABELS")));
  EXPECT_THAT(out, HasSubstr(absl::StrCat(a, "  101     0  helper       -  42   idle   -")));
  EXPECT_THAT(out, HasSubstr(absl::StrCat(
                       a, "  100     1  worker    1187  42   idle   k8s.pod=train-0,team=nlp")));
  EXPECT_THAT(out, HasSubstr(absl::StrCat(a, "   90     -  launcher     -")));
  EXPECT_THAT(out, HasSubstr(absl::StrCat(b_.target(), "  200     2  worker")));
  // A kineto process whose own profiler runs is busy; the kind column says
  // how each process is attached.
  EXPECT_THAT(out, HasSubstr(absl::StrCat(b_.target(), "  300     3  worker       -  42   busy")));
  EXPECT_THAT(out, HasSubstr("  kineto  python t.py\n"));
  EXPECT_THAT(out, HasSubstr("  KIND    COMMAND"));
  EXPECT_THAT(out, HasSubstr("torchrun ?[31mred"));  // no escape reaches the terminal
  // Hosts in the order given, ranks ascending, unknown rank last.
  EXPECT_LT(out.find(" 101 "), out.find(" 100 "));
  EXPECT_LT(out.find(" 100 "), out.find("  90 "));
  EXPECT_LT(out.find("  90 "), out.find(" 200 "));
  EXPECT_EQ(console_.err.str(), "");
}

TEST_F(CliFleetPsTest, SelectorsAreSentToEveryHost) {
  ASSERT_EQ(
      Run({"ps", "--host", a_.target(), "--host", b_.target(), "--job", "42", "--rank", "0-3,8",
           "--label", "team=nlp", "--pid", "100", "--limit", "5", "--include-helpers"}),
      kExitOk)
      << console_.err.str();
  for (FakeServer* server : {&a_, &b_}) {
    std::vector<v1::ListProcessesRequest> requests = server->service().list_processes_requests();
    ASSERT_EQ(requests.size(), 1u);
    const v1::ProcessSelector& s = requests[0].selector();
    EXPECT_EQ(s.job_id(), "42");
    ASSERT_EQ(s.ranks_size(), 2);
    EXPECT_EQ(s.ranks(0).first(), 0);
    EXPECT_EQ(s.ranks(0).last(), 3);
    EXPECT_EQ(s.ranks(1).first(), 8);
    EXPECT_EQ(s.labels().at("team"), "nlp");
    EXPECT_THAT(s.pids(), ::testing::ElementsAre(100));
    EXPECT_EQ(s.limit(), 5u);
    EXPECT_TRUE(s.include_helpers());
  }
}

TEST_F(CliFleetPsTest, JsonHasOneEntryPerHost) {
  const std::string dead = DeadTarget();
  b_.service().unary_error = grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "uid 1000 may not");
  EXPECT_EQ(Run({"ps", "--json", "--host", a_.target(), "--host", b_.target(), "--host", dead}),
            kExitPartialFailure);
  nlohmann::json json = nlohmann::json::parse(console_.out.str());
  ASSERT_EQ(json["hosts"].size(), 3u);
  const nlohmann::json& a = json["hosts"][0];
  EXPECT_EQ(a["host"], a_.target());
  EXPECT_EQ(a["hostname"], "node1");
  EXPECT_EQ(a["status"], "ok");
  EXPECT_EQ(a["error"], "");
  ASSERT_EQ(a["processes"].size(), 3u);
  EXPECT_EQ(a["processes"][0]["pid"], 100);
  EXPECT_EQ(a["processes"][0]["role"], "PROCESS_ROLE_WORKER");
  EXPECT_EQ(a["processes"][0]["currentStep"], "1187");
  EXPECT_EQ(a["processes"][0]["labels"]["team"], "nlp");
  EXPECT_EQ(json["hosts"][1]["status"], "refused");
  EXPECT_THAT(json["hosts"][1]["error"].get<std::string>(), HasSubstr("uid 1000 may not"));
  EXPECT_EQ(json["hosts"][1]["processes"].size(), 0u);
  EXPECT_EQ(json["hosts"][2]["status"], "unreachable");
  EXPECT_EQ(json["hosts"][2]["host"], dead);
  EXPECT_EQ(json["hosts"][2]["hostname"], "");
  EXPECT_THAT(console_.err.str(), HasSubstr(absl::StrCat("cannot reach gpuctld at ", dead)));
}

TEST_F(CliFleetPsTest, NoHostReachableExitsFour) {
  EXPECT_EQ(Run({"ps", "--host", DeadTarget(), "--host", DeadTarget()}), kExitDaemonError);
  EXPECT_EQ(console_.out.str(), "");
  EXPECT_THAT(console_.err.str(), HasSubstr("cannot reach gpuctld at"));
}

TEST_F(CliFleetPsTest, EmptySelectionSaysSo) {
  a_.service().processes.clear_processes();
  EXPECT_EQ(Run({"ps", "--job", "7", "--host", a_.target()}), kExitOk);
  EXPECT_EQ(console_.out.str(), "");
  EXPECT_THAT(console_.err.str(),
              HasSubstr("no processes matching job \"7\" attached to gpuctld on node1"));
}

TEST_F(CliFleetPsTest, AllAlsoListsRefusedAttachmentsNewestFirst) {
  for (int pid : {700, 701}) {
    v1::RejectedAttachment* r = a_.service().processes.add_rejected();
    r->set_pid(pid);
    r->set_uid(1001);
    r->set_reason(absl::StrCat("uid 1001 may not attach (not in ipc.allowed_uids)\x1b[2J", pid));
    r->mutable_time()->set_seconds(1'700'000'000 + pid);
    r->set_job_id(pid == 700 ? "" : "42");
    if (pid == 701) r->set_repeats(4);
  }
  ASSERT_EQ(Run({"ps", "--all", "--host", a_.target()}), kExitOk) << console_.err.str();
  ASSERT_EQ(a_.service().list_processes_requests().size(), 1u);
  EXPECT_TRUE(a_.service().list_processes_requests()[0].include_rejected());
  const std::string out = console_.out.str();
  EXPECT_THAT(out, HasSubstr("  100     1  worker"));
  EXPECT_THAT(out, HasSubstr("Refused lately:\n"));
  EXPECT_THAT(out, ::testing::ContainsRegex("HOST +PID +UID +TIME +JOB +REASON"));
  EXPECT_THAT(out, HasSubstr(absl::StrCat(a_.target(), "  700  1001  2023-11-14 22:25:00  -")));
  // No escape sequence from a Hello reaches the terminal.
  EXPECT_THAT(out, HasSubstr("uid 1001 may not attach (not in ipc.allowed_uids)?[2J700"));
  EXPECT_LT(out.find("  700  "), out.find("  701  "));  // the daemon's order
  EXPECT_THAT(out, HasSubstr("?[2J701 x5\n")) << "refused five times in all";
  EXPECT_THAT(out, Not(HasSubstr("?[2J700 x")));

  console_.out.str("");
  ASSERT_EQ(Run({"ps", "--all", "--json", "--host", a_.target()}), kExitOk);
  nlohmann::json json = nlohmann::json::parse(console_.out.str());
  const nlohmann::json& rejected = json["hosts"][0]["rejected"];
  ASSERT_EQ(rejected.size(), 2u);
  EXPECT_EQ(rejected[0]["pid"], 700);
  EXPECT_EQ(rejected[0]["uid"], 1001);
  EXPECT_EQ(rejected[1]["jobId"], "42");
  EXPECT_EQ(rejected[0]["time"], "2023-11-14T22:25:00Z");
  EXPECT_EQ(rejected[1]["repeats"], 4);
}

TEST_F(CliFleetPsTest, WithoutAllRefusalsAreNeitherAskedNorShown) {
  a_.service().processes.add_rejected()->set_pid(700);
  ASSERT_EQ(Run({"ps", "--host", a_.target()}), kExitOk);
  EXPECT_FALSE(a_.service().list_processes_requests()[0].include_rejected());
  EXPECT_THAT(console_.out.str(), Not(HasSubstr("Refused")));
  console_.out.str("");
  ASSERT_EQ(Run({"ps", "--json", "--host", a_.target()}), kExitOk);
  EXPECT_FALSE(nlohmann::json::parse(console_.out.str())["hosts"][0].contains("rejected"));
}

TEST_F(CliFleetPsTest, HostsFileAndDnsName) {
  std::string tmpl = (fs::temp_directory_path() / "gpuctl-ps-hosts-XXXXXX").string();
  const std::string dir = mkdtemp(tmpl.data());
  const std::string file = dir + "/hosts";
  std::ofstream(file) << "# two daemons\n" << a_.target() << "\n" << b_.target() << "  # b\n";
  ASSERT_EQ(Run({"ps", "--hosts-file", file, "--host", a_.target()}), kExitOk)
      << console_.err.str();
  EXPECT_EQ(a_.service().list_processes_requests().size(), 1u);  // deduplicated
  EXPECT_EQ(b_.service().list_processes_requests().size(), 1u);
  fs::remove_all(dir);

  // A daemon on every loopback address "localhost" names.
  FakeServer local("localhost:0");
  local.service().processes.set_host("local");
  *local.service().processes.add_processes() =
      Info(300, 0, "local", v1::PROCESS_ROLE_WORKER, {"python"});
  TestConsole console;
  ASSERT_EQ(RunCli({"ps", "--hosts", absl::StrCat("dns:localhost:", local.port())}, console.env()),
            kExitOk)
      << console.err.str();
  EXPECT_THAT(console.out.str(), ::testing::ContainsRegex(":[0-9]+  300     0  worker"));
  EXPECT_GE(local.service().list_processes_requests().size(), 1u);
  EXPECT_THAT(console.out.str(), Not(HasSubstr(" 100 ")));
}

}  // namespace
}  // namespace gpuctl::cli
