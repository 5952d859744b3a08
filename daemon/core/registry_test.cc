#include "daemon/core/registry.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/core/testing/fake_proc.h"
#include "daemon/core/testing/test_hello.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using ::gpuctl::testing::Creds;
using ::gpuctl::testing::FakeProc;
using ::gpuctl::testing::FakeProcReader;
using ::gpuctl::testing::MakeHello;

TEST(RegistryTest, AddFillsInfoFromHelloAndCredentials) {
  Registry r;
  absl::Time now = absl::FromUnixSeconds(1704067200);
  ASSERT_TRUE(r.Add(1, Creds(10), MakeHello(10, "42"), now).ok());
  AttachedProcess* p = r.Find(1);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->info.pid(), 10);
  EXPECT_EQ(p->info.uid(), 1000u);
  EXPECT_EQ(p->info.job_id(), "42");
  EXPECT_EQ(p->info.hostname(), "node1");
  EXPECT_EQ(p->info.cmdline(0), "python");
  EXPECT_EQ(p->info.attached_at().seconds(), 1704067200);
  EXPECT_EQ(p->info.capture_state(), v1::CAPTURE_STATE_IDLE);
  EXPECT_EQ(r.Add(1, Creds(10), MakeHello(10, "42"), now).code(), absl::StatusCode::kAlreadyExists);
  r.Remove(1);
  EXPECT_EQ(r.Find(1), nullptr);
}

TEST(RegistryTest, OnlyAllowedUidsAttach) {
  Registry r("/proc", {1000, 1002});
  absl::Time now = absl::FromUnixSeconds(1704067200);
  EXPECT_TRUE(r.Add(1, {10, 1000, 1000}, MakeHello(10, "42"), now).ok());
  EXPECT_TRUE(r.Add(2, {12, 1002, 1000}, MakeHello(12, "42"), now).ok());
  absl::Status st = r.Add(3, {11, 1001, 1000}, MakeHello(11, "42"), now);
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(st.message(), "uid 1001 may not attach (not in ipc.allowed_uids)");
  EXPECT_EQ(r.Find(3), nullptr);
  EXPECT_EQ(r.size(), 2u);
  // No list: every uid.
  EXPECT_TRUE(Registry().Add(1, {11, 1001, 1000}, MakeHello(11, "42"), now).ok());
}

TEST(RegistryTest, ARefusedProcessRetryingTakesOneEntry) {
  Registry r("/proc", {0});
  const absl::Time now = absl::FromUnixSeconds(1704067200);
  EXPECT_FALSE(r.Add(1, {50, 2000, 2000}, MakeHello(50, "7"), now).ok());
  for (int i = 0; i < 500; ++i) {
    EXPECT_FALSE(r.Add(2 + i, {60, 1000, 1000}, MakeHello(60, "7"), now + absl::Seconds(i)).ok());
  }
  ASSERT_EQ(r.Rejected().size(), 2u);
  EXPECT_EQ(r.Rejected().front().pid(), 50) << "the other uid's refusal is still listed";
  const v1::RejectedAttachment& looping = r.Rejected().back();
  EXPECT_EQ(looping.pid(), 60);
  EXPECT_EQ(looping.repeats(), 499u);
  EXPECT_EQ(looping.time().seconds(), 1704067200 + 499) << "the latest refusal's time";
}

TEST(RegistryTest, OneUidHoldsAtMostItsShareOfTheRefusals) {
  Registry r("/proc", {0});
  const absl::Time now = absl::FromUnixSeconds(1704067200);
  EXPECT_FALSE(r.Add(1, {50, 2000, 2000}, MakeHello(50, "7"), now).ok());
  // A uid forking new processes that each try once.
  for (int i = 0; i < 1000; ++i) {
    EXPECT_FALSE(r.Add(2 + i, {1000 + i, 1000, 1000}, MakeHello(1000 + i, "7"), now).ok());
  }
  ASSERT_EQ(r.Rejected().size(), kMaxRejectedPerUid + 1);
  EXPECT_EQ(r.Rejected().front().uid(), 2000u);
  EXPECT_EQ(r.Rejected().back().pid(), 1999) << "the uid's newest are kept";
  EXPECT_EQ(r.Rejected()[1].pid(), 1999 - static_cast<int>(kMaxRejectedPerUid) + 1);
}

TEST(RegistryTest, RemembersTheLastRefusals) {
  Registry r("/proc", {0});
  absl::Time now = absl::FromUnixSeconds(1704067200);
  // Two uids, alternating, so neither reaches its own share first.
  for (int i = 0; i < static_cast<int>(kMaxRejectedAttachments) + 5; ++i) {
    const uint32_t uid = 1000 + i % 2;
    EXPECT_FALSE(
        r.Add(i, {100 + i, uid, uid}, MakeHello(100 + i, "7"), now + absl::Seconds(i)).ok());
  }
  ASSERT_EQ(r.Rejected().size(), kMaxRejectedAttachments);
  const v1::RejectedAttachment& oldest = r.Rejected().front();
  EXPECT_EQ(oldest.pid(), 105);
  EXPECT_EQ(oldest.uid(), 1001u);
  EXPECT_EQ(oldest.time().seconds(), 1704067200 + 5);
  EXPECT_EQ(oldest.job_id(), "7");
  EXPECT_EQ(oldest.rank(), 0);
  EXPECT_EQ(oldest.repeats(), 0u);
  EXPECT_THAT(oldest.reason(), HasSubstr("uid 1001 may not attach"));

  // A pid mismatch is remembered with the peer's real pid.
  Registry open;
  EXPECT_FALSE(open.Add(1, Creds(11), MakeHello(10, "42"), now).ok());
  ASSERT_EQ(open.Rejected().size(), 1u);
  EXPECT_EQ(open.Rejected().back().pid(), 11);
  EXPECT_THAT(open.Rejected().back().reason(), HasSubstr("claims pid 10"));
  // An accepted process is not.
  EXPECT_TRUE(open.Add(2, Creds(10), MakeHello(10, "42"), now).ok());
  EXPECT_EQ(open.Rejected().size(), 1u);
}

TEST(RegistryTest, StoresTheCommandLineWithCredentialsRedacted) {
  Registry r;
  v1::ipc::Hello hello = MakeHello(10, "42");
  hello.add_cmdline("train.py");
  hello.add_cmdline("--hf-token");
  hello.add_cmdline("hf_abc");
  hello.add_cmdline("--db=postgres://u:pw@db/x");
  ASSERT_TRUE(r.Add(1, Creds(10), hello, absl::Now()).ok());
  EXPECT_THAT(r.Find(1)->info.cmdline(),
              ElementsAre("python", "train.py", "--hf-token", "***", "--db=postgres://u:***@db/x"));
}

// A process in a container claims its pid in its own namespace; the daemon
// sees another pid and checks the claim against NSpid in its /proc.
TEST(RegistryTest, AcceptsContainerPidOnlyWhenNsPidConfirmsIt) {
  std::string proc = absl::StrCat(::testing::TempDir(), "/registry_proc_", getpid());
  std::filesystem::create_directories(proc + "/4711");
  std::ofstream(proc + "/4711/status") << "Name:\tpython\nNSpid:\t4711\t12\nPPid:\t1\n";
  EXPECT_TRUE(ValidateHello(Creds(4711), MakeHello(12, "42"), proc).ok());
  EXPECT_EQ(ValidateHello(Creds(4711), MakeHello(13, "42"), proc).code(),
            absl::StatusCode::kPermissionDenied);
  // No status file: only the exact pid is accepted.
  EXPECT_EQ(ValidateHello(Creds(4712), MakeHello(12, "42"), proc).code(),
            absl::StatusCode::kPermissionDenied);

  Registry r(proc);
  ASSERT_TRUE(r.Add(1, Creds(4711), MakeHello(12, "42"), absl::UnixEpoch()).ok());
  EXPECT_EQ(r.Find(1)->info.pid(), 4711) << "the registry keeps the daemon's view of the pid";
  std::filesystem::remove_all(proc);
}

TEST(RegistryTest, SelectsByJobAndPids) {
  FakeProc proc;  // empty: no process has an attached ancestor
  Registry r(proc.root());
  absl::Time now = absl::UnixEpoch();
  ASSERT_TRUE(r.Add(1, Creds(10), MakeHello(10, "7"), now).ok());
  ASSERT_TRUE(r.Add(2, Creds(11), MakeHello(11, "7"), now).ok());
  ASSERT_TRUE(r.Add(3, Creds(12), MakeHello(12, ""), now).ok());
  v1::ProcessSelector s;
  s.set_job_id("7");
  EXPECT_EQ(r.Select(s).processes.size(), 2u);
  s.add_pids(11);
  s.add_pids(12);
  auto both = r.Select(s).processes;
  ASSERT_EQ(both.size(), 1u);
  EXPECT_EQ(both[0].process->info.pid(), 11);
  EXPECT_EQ(both[0].role, v1::PROCESS_ROLE_WORKER);
  s.clear_job_id();
  EXPECT_EQ(r.Select(s).processes.size(), 2u);
  EXPECT_EQ(r.DescribeAttached(), "3 attached: job \"7\" x2, job \"\" x1");
  EXPECT_EQ(Registry().DescribeAttached(), "0 attached");
  s.set_job_id("42");
  EXPECT_EQ(DescribeSelector(s), "job \"42\" and pids [11, 12]");
  EXPECT_TRUE(r.Select(v1::ProcessSelector()).processes.empty())
      << "no criterion selects nothing for a trace";
  EXPECT_EQ(r.Select(v1::ProcessSelector(), /*all_when_empty=*/true).processes.size(), 3u);
}

TEST(RegistryTest, LabelsFromHelloAreValidated) {
  Registry r;
  auto h = MakeHello(10, "42");
  h.add_labels("team=ml");
  h.add_labels("k8s.pod=trainer-0");
  h.add_labels("note=a=b");
  h.add_labels("empty=");
  ASSERT_TRUE(r.Add(1, Creds(10), h, absl::UnixEpoch()).ok());
  const auto& labels = r.Find(1)->info.labels();
  EXPECT_EQ(labels.size(), 4u);
  EXPECT_EQ(labels.at("team"), "ml");
  EXPECT_EQ(labels.at("k8s.pod"), "trainer-0");
  EXPECT_EQ(labels.at("note"), "a=b") << "split at the first '='";
  EXPECT_EQ(labels.at("empty"), "");

  auto refused = [](std::vector<std::string> labels) {
    auto h = MakeHello(10, "42");
    for (auto& l : labels) h.add_labels(l);
    absl::Status st = ValidateHello(Creds(10), h);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << labels[0];
    return std::string(st.message());
  };
  EXPECT_EQ(refused({"team"}), "Hello label \"team\" is not key=value");
  EXPECT_EQ(refused({"a=1", "a=2"}), "Hello label a appears twice");
  EXPECT_THAT(refused({"=x"}), HasSubstr("must be 1 to 253 bytes"));
  EXPECT_THAT(refused({"bad key=x"}), HasSubstr("may hold only letters"));
  EXPECT_THAT(refused({"k=tab\there"}), HasSubstr("not printable ASCII"));
  EXPECT_THAT(refused({"k=" + std::string(254, 'v')}), HasSubstr("more than 253"));
  std::vector<std::string> many;
  for (int i = 0; i < 65; ++i) many.push_back(absl::StrCat("k", i, "=v"));
  EXPECT_EQ(refused(many), "Hello has 65 labels, more than 64");
  many.pop_back();
  auto ok = MakeHello(10, "42");
  for (auto& l : many) ok.add_labels(l);
  EXPECT_TRUE(ValidateHello(Creds(10), ok).ok());
}

TEST(RegistryTest, AncestryFallsBackToTheHelloPpid) {
  FakeProc proc;
  proc.Add(10, 7);
  Registry r(proc.root());
  auto h = MakeHello(10, "42");
  h.set_ppid(3);
  ASSERT_TRUE(r.Add(1, Creds(10), h, absl::UnixEpoch()).ok());
  EXPECT_THAT(r.Find(1)->ancestors, ElementsAre(7));
  EXPECT_EQ(r.Find(1)->info.ppid(), 7) << "the daemon's view of the parent";
  h = MakeHello(11, "42");
  h.set_ppid(3);
  ASSERT_TRUE(r.Add(2, Creds(11), h, absl::UnixEpoch()).ok());
  EXPECT_THAT(r.Find(2)->ancestors, ElementsAre(3));
  EXPECT_EQ(r.Find(2)->info.ppid(), 3);
}

TEST(RegistryTest, ReadsTheProcessTreeThroughItsProcReader) {
  auto proc = std::make_unique<FakeProcReader>();
  proc->SetParent(20, 10);
  proc->SetParent(10, 1);
  proc->SetInnermostPid(30, 5);
  Registry r(std::move(proc));
  ASSERT_TRUE(r.Add(1, Creds(10), MakeHello(10, "7"), absl::UnixEpoch()).ok());
  ASSERT_TRUE(r.Add(2, Creds(20), MakeHello(20, "7"), absl::UnixEpoch()).ok());
  ASSERT_TRUE(r.Add(3, Creds(30), MakeHello(5, "8"), absl::UnixEpoch()).ok())
      << "a container pid the reader confirms";
  EXPECT_THAT(r.Find(2)->ancestors, ElementsAre(10, 1));
  EXPECT_EQ(r.Find(2)->info.ppid(), 10);
  EXPECT_EQ(r.Roles()[2], v1::PROCESS_ROLE_HELPER) << "a fork of pid 10, same job and rank";
}

// torchrun (job 9, no rank) -> two ranks -> one DataLoader helper each,
// plus a process of another job.
class RolesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    proc_.Add(1, 0);
    proc_.Add(50, 1);  // an unattached shell
    proc_.Add(100, 50);
    proc_.Add(200, 100);
    proc_.Add(201, 100);
    proc_.Add(300, 200);
    proc_.Add(301, 201);
    proc_.Add(400, 1);
    registry_ = std::make_unique<Registry>(proc_.root());
    Attach(1, 100, "9", -1);
    Attach(2, 200, "9", 0);
    Attach(3, 201, "9", 1);
    Attach(4, 300, "9", 0);
    Attach(5, 301, "9", 1);
    Attach(6, 400, "other", 0);
  }
  void Attach(PeerId peer, int pid, const std::string& job, int rank,
              std::vector<std::string> labels = {}, std::vector<std::string> cmdline = {}) {
    auto h = MakeHello(pid, job);
    if (!cmdline.empty()) *h.mutable_cmdline() = {cmdline.begin(), cmdline.end()};
    h.set_rank(rank);
    h.set_local_rank(rank);
    h.set_world_size(rank >= 0 ? 8 : -1);
    for (auto& l : labels) h.add_labels(l);
    ASSERT_TRUE(registry_->Add(peer, Creds(pid), h, absl::UnixEpoch()).ok());
  }
  std::vector<int> Pids(const v1::ProcessSelector& s) {
    std::vector<int> out;
    for (const auto& p : registry_->Select(s).processes) out.push_back(p.process->info.pid());
    return out;
  }
  FakeProc proc_;
  std::unique_ptr<Registry> registry_;
};

TEST_F(RolesTest, LauncherWorkersAndHelpers) {
  auto roles = registry_->Roles();
  EXPECT_EQ(roles[1], v1::PROCESS_ROLE_LAUNCHER);
  EXPECT_EQ(roles[2], v1::PROCESS_ROLE_WORKER);
  EXPECT_EQ(roles[3], v1::PROCESS_ROLE_WORKER);
  EXPECT_EQ(roles[4], v1::PROCESS_ROLE_HELPER);
  EXPECT_EQ(roles[5], v1::PROCESS_ROLE_HELPER);
  EXPECT_EQ(roles[6], v1::PROCESS_ROLE_WORKER);
  EXPECT_EQ(Registry::Info(*registry_->Find(4), roles[4]).role(), v1::PROCESS_ROLE_HELPER);

  // Roles follow what is attached now: without its rank, a helper has
  // nobody to help and does the rank's work itself.
  registry_->Remove(2);
  registry_->Remove(3);
  roles = registry_->Roles();
  EXPECT_EQ(roles[1], v1::PROCESS_ROLE_LAUNCHER);
  EXPECT_EQ(roles[4], v1::PROCESS_ROLE_WORKER);
  registry_->Remove(4);
  registry_->Remove(5);
  EXPECT_EQ(registry_->Roles()[1], v1::PROCESS_ROLE_WORKER);
}

TEST_F(RolesTest, AHelperOfAHelperIsAHelper) {
  proc_.Add(302, 300);
  Attach(7, 302, "9", 0);
  EXPECT_EQ(registry_->Roles()[7], v1::PROCESS_ROLE_HELPER);
  EXPECT_EQ(registry_->Roles()[2], v1::PROCESS_ROLE_WORKER);
}

TEST_F(RolesTest, AnExecOfTheSameRankIsAWorkerAndMakesItsParentALauncher) {
  // A wrapper (or torchrun under srun, which takes SLURM_PROCID as its
  // rank) with the same job and rank as the python process it runs.
  proc_.Add(500, 1);
  proc_.Add(501, 500);
  proc_.Add(502, 501);
  Attach(7, 500, "wrap", 3, {}, {"/bin/sh", "run.sh"});
  Attach(8, 501, "wrap", 3, {}, {"python", "train.py"});
  // Its DataLoader workers: forks (same command line) and a spawn child.
  Attach(9, 502, "wrap", 3, {}, {"python", "train.py"});
  proc_.Add(503, 501);
  Attach(
      10, 503, "wrap", 3, {},
      {"python", "-c", "from multiprocessing.spawn import spawn_main", "--multiprocessing-fork"});
  auto roles = registry_->Roles();
  EXPECT_EQ(roles[7], v1::PROCESS_ROLE_LAUNCHER);
  EXPECT_EQ(roles[8], v1::PROCESS_ROLE_WORKER);
  EXPECT_EQ(roles[9], v1::PROCESS_ROLE_HELPER);
  EXPECT_EQ(roles[10], v1::PROCESS_ROLE_HELPER);
  v1::ProcessSelector s;
  s.set_job_id("wrap");
  EXPECT_THAT(Pids(s), ElementsAre(501));
}

TEST_F(RolesTest, SelectsWorkersByDefault) {
  v1::ProcessSelector s;
  s.set_job_id("9");
  EXPECT_THAT(Pids(s), ElementsAre(200, 201));
  EXPECT_EQ(registry_->Select(s).left_out_by_role, 3u);
  s.set_include_helpers(true);
  EXPECT_THAT(Pids(s), ElementsAre(100, 200, 201, 300, 301));
}

TEST_F(RolesTest, PidsSelectDescendants) {
  v1::ProcessSelector s;
  s.add_pids(100);  // the launcher stands for its workers
  EXPECT_THAT(Pids(s), ElementsAre(200, 201));
  s.set_include_helpers(true);
  EXPECT_THAT(Pids(s), ElementsAre(100, 200, 201, 300, 301));
  s.Clear();
  s.add_pids(300);  // a helper named by pid is taken as asked
  EXPECT_THAT(Pids(s), ElementsAre(300));
  s.Clear();
  s.add_pids(200);  // a rank: its helpers only with include_helpers
  EXPECT_THAT(Pids(s), ElementsAre(200));
  s.Clear();
  s.add_pids(50);  // an unattached ancestor
  EXPECT_THAT(Pids(s), ElementsAre(200, 201));
  s.Clear();
  s.add_pids(1);
  EXPECT_THAT(Pids(s), ElementsAre(200, 201, 400));
  s.set_job_id("other");
  EXPECT_THAT(Pids(s), ElementsAre(400));
}

TEST_F(RolesTest, RanksLabelsAndLimit) {
  Attach(7, 500, "9", 3, {"team=ml", "zone=a"});
  Attach(8, 501, "9", 2, {"team=ml", "zone=b"});
  Attach(9, 502, "9", -1, {"team=ml"});
  v1::ProcessSelector s;
  v1::RankRange* r = s.add_ranks();
  r->set_first(1);
  r->set_last(2);
  EXPECT_THAT(Pids(s), ElementsAre(201, 501));
  r = s.add_ranks();
  r->set_first(3);
  r->set_last(3);
  EXPECT_THAT(Pids(s), ElementsAre(201, 500, 501));
  s.set_job_id("other");
  EXPECT_THAT(Pids(s), ElementsAre());

  s.Clear();
  (*s.mutable_labels())["team"] = "ml";
  EXPECT_THAT(Pids(s), ElementsAre(500, 501, 502));
  (*s.mutable_labels())["zone"] = "b";
  EXPECT_THAT(Pids(s), ElementsAre(501));
  (*s.mutable_labels())["zone"] = "c";
  EXPECT_THAT(Pids(s), ElementsAre());

  s.Clear();
  s.set_job_id("9");
  s.set_limit(3);
  // By rank (unknown last), then pid; the output keeps attach order.
  EXPECT_THAT(Pids(s), ElementsAre(200, 201, 501));
  s.set_limit(5);
  EXPECT_THAT(Pids(s), ElementsAre(200, 201, 500, 501, 502));
  s.set_limit(100);
  EXPECT_EQ(Pids(s).size(), 5u);
  s.clear_job_id();
  s.set_limit(2);
  EXPECT_TRUE(Pids(s).empty());
  EXPECT_EQ(registry_->Select(s, /*all_when_empty=*/true).processes.size(), 2u);
}

}  // namespace
}  // namespace gpuctl::daemon
