// Registry::CheckAncestorReach: a pid that is not attached selects its
// descendants, but not several jobs at once unless asked, and never as pid 1.
#include <memory>
#include <vector>

#include "daemon/core/registry.h"
#include "daemon/core/testing/fake_proc.h"
#include "daemon/core/testing/test_hello.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::gpuctl::testing::Creds;
using ::gpuctl::testing::FakeProcReader;
using ::gpuctl::testing::MakeHello;

// init (1) -> an unattached shell (50) -> job "a" x2, job "b" x1;
// init -> an attached launcher (400) -> job "x", job "y";
// init -> job "c".
class AncestorReachTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto proc = std::make_unique<FakeProcReader>();
    for (auto [pid, ppid] : std::vector<std::pair<int, int>>{{50, 1},
                                                             {100, 50},
                                                             {101, 50},
                                                             {200, 50},
                                                             {300, 1},
                                                             {400, 1},
                                                             {401, 400},
                                                             {402, 400}}) {
      proc->SetParent(pid, ppid);
    }
    registry_ = std::make_unique<Registry>(std::move(proc));
    Attach(100, "a");
    Attach(101, "a");
    Attach(200, "b");
    Attach(300, "c");
    Attach(400, "");
    Attach(401, "x");
    Attach(402, "y");
  }
  void Attach(int pid, const std::string& job) {
    ASSERT_TRUE(registry_->Add(++peer_, Creds(pid), MakeHello(pid, job), absl::UnixEpoch()).ok());
  }
  // Select, then the check, as the core does.
  absl::Status Check(const v1::ProcessSelector& selector) {
    Selection selection = registry_->Select(selector);
    EXPECT_FALSE(selection.processes.empty());
    return registry_->CheckAncestorReach(selector, selection);
  }
  static v1::ProcessSelector Pids(const std::vector<int>& pids) {
    v1::ProcessSelector s;
    for (int pid : pids) s.add_pids(pid);
    return s;
  }

  std::unique_ptr<Registry> registry_;
  PeerId peer_ = 0;
};

TEST_F(AncestorReachTest, AnUnattachedAncestorOfSeveralJobsIsRefusedUnlessAsked) {
  v1::ProcessSelector shell = Pids({50});
  absl::Status st = Check(shell);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(),
            "pid 50 is not an attached process; as an ancestor it reaches processes of 2 jobs: "
            "job \"a\" (2 processes), job \"b\" (1 process); name the job (job_id, gpuctl --job "
            "ID) or ask for every job explicitly (allow_multiple_jobs, gpuctl --all-jobs)");
  shell.set_allow_multiple_jobs(true);
  EXPECT_TRUE(Check(shell).ok());
  EXPECT_EQ(registry_->Select(shell).processes.size(), 3u);
  // One job through it is what a launcher's pid is for.
  v1::ProcessSelector one_job = Pids({50});
  one_job.set_job_id("a");
  EXPECT_TRUE(Check(one_job).ok());
}

TEST_F(AncestorReachTest, PidOneNeverMeansEverything) {
  v1::ProcessSelector init = Pids({1});
  absl::Status st = Check(init);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(),
            "pid 1 is not an attached process, and every process descends from it (here job "
            "\"a\" (2 processes), job \"b\" (1 process), job \"c\" (1 process), job \"x\" (1 "
            "process), job \"y\" (1 process)); select by job (job_id, gpuctl --job ID) or by the "
            "pid of a job's launcher");
  init.set_allow_multiple_jobs(true);
  EXPECT_EQ(Check(init).code(), absl::StatusCode::kFailedPrecondition);
  init.set_job_id("c");
  EXPECT_EQ(Check(init).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(AncestorReachTest, AttachedPidsSelectTheirDescendantsWhateverTheirJobs) {
  // An attached launcher stands for its workers, of whatever jobs.
  EXPECT_TRUE(Check(Pids({400})).ok());
  EXPECT_EQ(registry_->Select(Pids({400})).processes.size(), 2u);
  // Processes named themselves, of several jobs: asked for explicitly.
  EXPECT_TRUE(Check(Pids({100, 200, 300})).ok());
  // An attached pid 1 (a container's init that loaded the library) too.
  Attach(1, "");
  EXPECT_TRUE(Check(Pids({1})).ok());
}

}  // namespace
}  // namespace gpuctl::daemon
